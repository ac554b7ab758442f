# The real-GPU check is a script run by hand on a machine with an NVIDIA GPU
# (`python tests/device/gpu_check.py`), never part of the normal test run.
collect_ignore = ["gpu_check.py"]
