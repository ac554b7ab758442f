/*
 * A stand-in for libnvidia-ml.so.1, for tests on machines without an NVIDIA GPU.
 *
 * Compiled by the tests against the real nvml.h (PyPI `nvidia-nvml-dev`), so every struct layout,
 * constant and function signature is NVIDIA's own; the real nvidia-ml-py binding loads it by its
 * soname and runs unchanged. It answers from a state file named by $NVML_STUB_STATE, re-read
 * whenever the file is replaced, so a test can change the "hardware" between two collections.
 *
 * The state format is flat `key=value` lines (JSON would need a parser here for no gain):
 *
 *   device_count=8
 *   gpu.N.name / gpu.N.uuid                       strings
 *   gpu.N.memory_total / _used / _free / _reserved  bytes (v2 semantics: used excludes reserved)
 *   gpu.N.utilization_gpu / utilization_memory    percent
 *   gpu.N.power_mw, gpu.N.temperature_c, gpu.N.sm_clock_mhz, gpu.N.mem_clock_mhz
 *   gpu.N.pcie_tx_bytes / pcie_rx_bytes           NVML_FI_DEV_PCIE_COUNT_{TX,RX}_BYTES
 *   gpu.N.nvlink_tx_kib / nvlink_rx_kib           NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_{TX,RX}, all links
 *   gpu.N.clocks_event_reasons                    bitmask (decimal)
 *   gpu.N.compute_pids / graphics_pids            comma-separated PIDs
 *   gpu.N.gpm=1|0                                 GPM support (Hopper and newer)
 *   gpu.N.gpm.ID=VALUE                            value of GPM metric ID (percent or MiB/s)
 *   gpu.N.lost=1                                  every call on the device: NVML_ERROR_GPU_IS_LOST
 *   gpu.N.error.FUNC=CODE                         one function answers CODE (e.g. 3 = NOT_SUPPORTED);
 *                                                 FUNC: name uuid memory memory_v2 utilization power
 *                                                 temperature clock fields clocks_event processes
 *                                                 gpm_sample events
 *   gpu.N.pcie_gen / pcie_width                   current PCIe link generation and width
 *   gpu.N.pcie_max_gen / pcie_max_width           max for the GPU in its slot (MaxPcieLink*)
 *   gpu.N.pcie_gpu_max_gen                        the GPU's own max (GpuMaxPcieLinkGeneration)
 *   gpu.N.pcie_replay                             PCIe replay counter
 *   gpu.N.nvlink_states=1,1,0,...                 per-link active (1) or inactive (0); links past
 *                                                 the list answer NVML_ERROR_INVALID_ARGUMENT
 *   gpu.N.nvlink_error.LINK.COUNTER               NvLink error counter (COUNTER: nvmlNvLinkErrorCounter_t)
 *   gpu.N.fabric_health_mask                      GpuFabricInfoV healthMask (decimal)
 *   xid_events=GPU:XID,GPU:XID                    XID events in order; each event set receives each
 *                                                 listed event once (if its GPU is registered), so a
 *                                                 test appends to the list to raise new ones
 *   init_error=CODE                               nvmlInit fails with CODE
 *
 * A key that is absent means NVML_ERROR_NOT_SUPPORTED for what it would answer.
 */

#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include <nvml.h>

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>

#define MAX_DEVICES 64
#define MAX_ENTRIES 8192
#define MAX_LINE 1024
#define MAX_PIDS 64

struct nvmlDevice_st {
    unsigned int index;
};

struct nvmlEventSet_st {
    unsigned long long registered[MAX_DEVICES];
    unsigned long long delivered; /* how many entries of xid_events this set has consumed */
};

struct nvmlGpmSample_st {
    int device;
    int filled;
    unsigned long long sequence;
};

static struct nvmlDevice_st devices[MAX_DEVICES];
static char *keys[MAX_ENTRIES];
static char *values[MAX_ENTRIES];
static int entry_count;
static struct stat loaded_stat;
static int state_loaded;
static unsigned long long sample_sequence;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- state file ------------------------------------------------------------------------------ */

static void clear_state(void) {
    for (int i = 0; i < entry_count; i++) {
        free(keys[i]);
        free(values[i]);
    }
    entry_count = 0;
}

static int same_file(const struct stat *a, const struct stat *b) {
    return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Re-read the state file when it changed; returns 0 when a state is available. */
static int reload_state(void) {
    const char *path = getenv("NVML_STUB_STATE");
    struct stat now;
    if (path == NULL || stat(path, &now) != 0) {
        return -1;
    }
    if (state_loaded && same_file(&now, &loaded_stat)) {
        return 0;
    }
    FILE *file = fopen(path, "r");
    if (file == NULL) {
        return -1;
    }
    clear_state();
    char line[MAX_LINE];
    while (fgets(line, sizeof line, file) != NULL && entry_count < MAX_ENTRIES) {
        size_t length = strcspn(line, "\r\n");
        line[length] = '\0';
        if (line[0] == '\0' || line[0] == '#') {
            continue;
        }
        char *equals = strchr(line, '=');
        if (equals == NULL) {
            continue;
        }
        *equals = '\0';
        keys[entry_count] = strdup(line);
        values[entry_count] = strdup(equals + 1);
        entry_count++;
    }
    fclose(file);
    loaded_stat = now;
    state_loaded = 1;
    return 0;
}

static const char *lookup(const char *key) {
    for (int i = entry_count - 1; i >= 0; i--) {
        if (strcmp(keys[i], key) == 0) {
            return values[i];
        }
    }
    return NULL;
}

static const char *gpu_value(unsigned int index, const char *name) {
    char key[256];
    snprintf(key, sizeof key, "gpu.%u.%s", index, name);
    return lookup(key);
}

static int gpu_ull(unsigned int index, const char *name, unsigned long long *out) {
    const char *text = gpu_value(index, name);
    if (text == NULL || *text == '\0') {
        return 0;
    }
    *out = strtoull(text, NULL, 10);
    return 1;
}

static unsigned int device_count(void) {
    const char *text = lookup("device_count");
    unsigned long count = text ? strtoul(text, NULL, 10) : 0;
    return count > MAX_DEVICES ? MAX_DEVICES : (unsigned int)count;
}

/* Common entry of every per-device call: valid handle, not lost, no injected error. */
static nvmlReturn_t device_check(nvmlDevice_t device, const char *function) {
    if (reload_state() != 0) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (device == NULL || device < devices || device >= devices + MAX_DEVICES ||
        device->index >= device_count()) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    const char *lost = gpu_value(device->index, "lost");
    if (lost != NULL && strcmp(lost, "1") == 0) {
        return NVML_ERROR_GPU_IS_LOST;
    }
    char name[128];
    snprintf(name, sizeof name, "error.%s", function);
    const char *error = gpu_value(device->index, name);
    if (error != NULL) {
        return (nvmlReturn_t)strtol(error, NULL, 10);
    }
    return NVML_SUCCESS;
}

#define CHECK(device, function)                                  \
    do {                                                         \
        nvmlReturn_t check_ = device_check((device), (function)); \
        if (check_ != NVML_SUCCESS) {                            \
            pthread_mutex_unlock(&lock);                         \
            return check_;                                       \
        }                                                        \
    } while (0)

/* ---- init, errors, enumeration ----------------------------------------------------------------- */

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    pthread_mutex_lock(&lock);
    nvmlReturn_t result = NVML_SUCCESS;
    if (reload_state() != 0) {
        result = NVML_ERROR_DRIVER_NOT_LOADED;
    } else if (lookup("init_error") != NULL) {
        result = (nvmlReturn_t)strtol(lookup("init_error"), NULL, 10);
    }
    for (unsigned int i = 0; i < MAX_DEVICES; i++) {
        devices[i].index = i;
    }
    pthread_mutex_unlock(&lock);
    return result;
}

nvmlReturn_t nvmlInit_v2(void) {
    return nvmlInitWithFlags(0);
}

nvmlReturn_t nvmlShutdown(void) {
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    if (version == NULL || length < 16) {
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    snprintf(version, length, "%s", "570.00.stub");
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    pthread_mutex_lock(&lock);
    if (reload_state() != 0) {
        pthread_mutex_unlock(&lock);
        return NVML_ERROR_UNINITIALIZED;
    }
    *count = device_count();
    pthread_mutex_unlock(&lock);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    pthread_mutex_lock(&lock);
    if (reload_state() != 0) {
        pthread_mutex_unlock(&lock);
        return NVML_ERROR_UNINITIALIZED;
    }
    if (index >= device_count() || device == NULL) {
        pthread_mutex_unlock(&lock);
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *device = &devices[index];
    CHECK(*device, "handle");
    pthread_mutex_unlock(&lock);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index) {
    pthread_mutex_lock(&lock);
    CHECK(device, "index");
    *index = device->index;
    pthread_mutex_unlock(&lock);
    return NVML_SUCCESS;
}

static nvmlReturn_t copy_string(nvmlDevice_t device, const char *function, const char *key, char *out,
                                unsigned int length) {
    pthread_mutex_lock(&lock);
    CHECK(device, function);
    const char *text = gpu_value(device->index, key);
    nvmlReturn_t result = NVML_SUCCESS;
    if (text == NULL) {
        result = NVML_ERROR_NOT_SUPPORTED;
    } else if (out == NULL || strlen(text) + 1 > length) {
        result = NVML_ERROR_INSUFFICIENT_SIZE;
    } else {
        memcpy(out, text, strlen(text) + 1);
    }
    pthread_mutex_unlock(&lock);
    return result;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    return copy_string(device, "name", "name", name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    return copy_string(device, "uuid", "uuid", uuid, length);
}

/* ---- plain readings ---------------------------------------------------------------------------- */

static nvmlReturn_t read_ull(nvmlDevice_t device, const char *function, const char *key,
                             unsigned long long *out) {
    pthread_mutex_lock(&lock);
    CHECK(device, function);
    nvmlReturn_t result = gpu_ull(device->index, key, out) ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
    pthread_mutex_unlock(&lock);
    return result;
}

/* Both memory calls answer from the same keys; `call` names which one the state may fail. */
static nvmlReturn_t read_memory(nvmlDevice_t device, const char *call, unsigned long long *total,
                                unsigned long long *used, unsigned long long *free_, unsigned long long *reserved) {
    nvmlReturn_t result = read_ull(device, call, "memory_total", total);
    if (result != NVML_SUCCESS) {
        return result;
    }
    *reserved = 0;
    pthread_mutex_lock(&lock);
    int ok = gpu_ull(device->index, "memory_used", used) && gpu_ull(device->index, "memory_free", free_);
    gpu_ull(device->index, "memory_reserved", reserved);
    pthread_mutex_unlock(&lock);
    return ok ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    unsigned long long total, used, free_, reserved;
    nvmlReturn_t result = read_memory(device, "memory", &total, &used, &free_, &reserved);
    if (result != NVML_SUCCESS) {
        return result;
    }
    memory->total = total;
    memory->free = free_;
    memory->used = used + reserved; /* v1: "Sum of Reserved and Allocated device memory" */
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
    if (memory == NULL || memory->version != nvmlMemory_v2) {
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    }
    unsigned long long total, used, free_, reserved;
    nvmlReturn_t result = read_memory(device, "memory_v2", &total, &used, &free_, &reserved);
    if (result != NVML_SUCCESS) {
        return result;
    }
    memory->total = total;
    memory->reserved = reserved;
    memory->free = free_;
    memory->used = used;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization) {
    unsigned long long gpu, memory = 0;
    nvmlReturn_t result = read_ull(device, "utilization", "utilization_gpu", &gpu);
    if (result != NVML_SUCCESS) {
        return result;
    }
    pthread_mutex_lock(&lock);
    gpu_ull(device->index, "utilization_memory", &memory);
    pthread_mutex_unlock(&lock);
    utilization->gpu = (unsigned int)gpu;
    utilization->memory = (unsigned int)memory;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power) {
    unsigned long long value;
    nvmlReturn_t result = read_ull(device, "power", "power_mw", &value);
    if (result == NVML_SUCCESS) {
        *power = (unsigned int)value;
    }
    return result;
}

nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device, nvmlTemperature_t *temperature) {
    if (temperature == NULL || temperature->version != nvmlTemperature_v1) {
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    }
    if (temperature->sensorType != NVML_TEMPERATURE_GPU) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    unsigned long long value;
    nvmlReturn_t result = read_ull(device, "temperature", "temperature_c", &value);
    if (result == NVML_SUCCESS) {
        temperature->temperature = (int)value;
    }
    return result;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensor, unsigned int *temp) {
    if (sensor != NVML_TEMPERATURE_GPU) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    unsigned long long value;
    nvmlReturn_t result = read_ull(device, "temperature", "temperature_c", &value);
    if (result == NVML_SUCCESS) {
        *temp = (unsigned int)value;
    }
    return result;
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock) {
    const char *key = type == NVML_CLOCK_MEM ? "mem_clock_mhz" : "sm_clock_mhz";
    unsigned long long value;
    nvmlReturn_t result = read_ull(device, "clock", key, &value);
    if (result == NVML_SUCCESS) {
        *clock = (unsigned int)value;
    }
    return result;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device, unsigned long long *reasons) {
    return read_ull(device, "clocks_event", "clocks_event_reasons", reasons);
}

nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int count, nvmlFieldValue_t *values_out) {
    pthread_mutex_lock(&lock);
    CHECK(device, "fields");
    struct timeval now;
    gettimeofday(&now, NULL);
    for (int i = 0; i < count; i++) {
        nvmlFieldValue_t *field = &values_out[i];
        const char *key = NULL;
        switch (field->fieldId) {
        case NVML_FI_DEV_PCIE_COUNT_TX_BYTES: key = "pcie_tx_bytes"; break;
        case NVML_FI_DEV_PCIE_COUNT_RX_BYTES: key = "pcie_rx_bytes"; break;
        case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX:
            key = field->scopeId == UINT_MAX ? "nvlink_tx_kib" : NULL;
            break;
        case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX:
            key = field->scopeId == UINT_MAX ? "nvlink_rx_kib" : NULL;
            break;
        default: key = NULL;
        }
        unsigned long long value;
        field->timestamp = (long long)now.tv_sec * 1000000LL + now.tv_usec;
        field->latencyUsec = 0;
        if (key != NULL && gpu_ull(device->index, key, &value)) {
            field->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
            field->value.ullVal = value;
            field->nvmlReturn = NVML_SUCCESS;
        } else {
            field->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        }
    }
    pthread_mutex_unlock(&lock);
    return NVML_SUCCESS;
}

/* ---- processes --------------------------------------------------------------------------------- */

static int parse_pids(const char *text, unsigned int *pids) {
    int count = 0;
    while (text != NULL && *text != '\0' && count < MAX_PIDS) {
        char *end;
        unsigned long pid = strtoul(text, &end, 10);
        if (end == text) {
            break;
        }
        pids[count++] = (unsigned int)pid;
        text = *end == ',' ? end + 1 : end;
    }
    return count;
}

static nvmlReturn_t running_processes(nvmlDevice_t device, const char *key, unsigned int *info_count,
                                      nvmlProcessInfo_t *infos) {
    pthread_mutex_lock(&lock);
    CHECK(device, "processes");
    unsigned int pids[MAX_PIDS];
    int count = parse_pids(gpu_value(device->index, key), pids);
    nvmlReturn_t result = NVML_SUCCESS;
    if (count == 0) {
        *info_count = 0;
    } else if (infos == NULL || *info_count < (unsigned int)count) {
        *info_count = (unsigned int)count;
        result = NVML_ERROR_INSUFFICIENT_SIZE;
    } else {
        for (int i = 0; i < count; i++) {
            infos[i].pid = pids[i];
            infos[i].usedGpuMemory = 1ULL << 30;
            infos[i].gpuInstanceId = 0xFFFFFFFF;
            infos[i].computeInstanceId = 0xFFFFFFFF;
        }
        *info_count = (unsigned int)count;
    }
    pthread_mutex_unlock(&lock);
    return result;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *count,
                                                     nvmlProcessInfo_t *infos) {
    return running_processes(device, "compute_pids", count, infos);
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int *count,
                                                      nvmlProcessInfo_t *infos) {
    return running_processes(device, "graphics_pids", count, infos);
}

/* ---- events (XID) ------------------------------------------------------------------------------ */

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
    *set = calloc(1, sizeof(struct nvmlEventSet_st));
    return *set == NULL ? NVML_ERROR_MEMORY : NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
    free(set);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *types) {
    pthread_mutex_lock(&lock);
    CHECK(device, "events");
    *types = nvmlEventTypeXidCriticalError | nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError;
    pthread_mutex_unlock(&lock);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types, nvmlEventSet_t set) {
    pthread_mutex_lock(&lock);
    CHECK(device, "events");
    set->registered[device->index] |= types;
    pthread_mutex_unlock(&lock);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms) {
    (void)timeoutms; /* the stub never blocks: a queued event or an immediate timeout */
    pthread_mutex_lock(&lock);
    if (reload_state() != 0) {
        pthread_mutex_unlock(&lock);
        return NVML_ERROR_UNINITIALIZED;
    }
    const char *text = lookup("xid_events");
    unsigned long long position = 0;
    while (text != NULL && *text != '\0') {
        char *end;
        unsigned long gpu = strtoul(text, &end, 10);
        if (*end != ':') {
            break;
        }
        unsigned long long xid = strtoull(end + 1, &end, 10);
        text = *end == ',' ? end + 1 : end;
        if (position++ < set->delivered) {
            continue;
        }
        set->delivered = position;
        if (gpu >= MAX_DEVICES || !(set->registered[gpu] & nvmlEventTypeXidCriticalError)) {
            continue;
        }
        data->device = &devices[gpu];
        data->eventType = nvmlEventTypeXidCriticalError;
        data->eventData = xid;
        data->gpuInstanceId = 0xFFFFFFFF;
        data->computeInstanceId = 0xFFFFFFFF;
        pthread_mutex_unlock(&lock);
        return NVML_SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    return NVML_ERROR_TIMEOUT;
}

/* ---- GPM (Hopper and newer) -------------------------------------------------------------------- */

static int gpm_supported(unsigned int index) {
    const char *text = gpu_value(index, "gpm");
    return text != NULL && strcmp(text, "1") == 0;
}

nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t *support) {
    if (support == NULL || support->version != NVML_GPM_SUPPORT_VERSION) {
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    }
    pthread_mutex_lock(&lock);
    CHECK(device, "gpm_support");
    support->isSupportedDevice = gpm_supported(device->index) ? 1 : 0;
    pthread_mutex_unlock(&lock);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *sample) {
    *sample = calloc(1, sizeof(struct nvmlGpmSample_st));
    return *sample == NULL ? NVML_ERROR_MEMORY : NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t sample) {
    free(sample);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t sample) {
    pthread_mutex_lock(&lock);
    CHECK(device, "gpm_sample");
    if (!gpm_supported(device->index)) {
        pthread_mutex_unlock(&lock);
        return NVML_ERROR_NOT_SUPPORTED;
    }
    sample->device = (int)device->index;
    sample->filled = 1;
    sample->sequence = ++sample_sequence;
    pthread_mutex_unlock(&lock);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *request) {
    if (request == NULL || request->version != NVML_GPM_METRICS_GET_VERSION) {
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    }
    nvmlGpmSample_t first = request->sample1, second = request->sample2;
    if (first == NULL || second == NULL || !first->filled || !second->filled || first->device != second->device ||
        first->sequence == second->sequence || request->numMetrics > NVML_GPM_METRIC_MAX) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    pthread_mutex_lock(&lock);
    CHECK(&devices[first->device], "gpm_metrics");
    for (unsigned int i = 0; i < request->numMetrics; i++) {
        nvmlGpmMetric_t *metric = &request->metrics[i];
        char key[64];
        snprintf(key, sizeof key, "gpm.%u", metric->metricId);
        const char *text = gpu_value((unsigned int)first->device, key);
        if (text == NULL) {
            metric->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
            metric->value = 0.0;
        } else {
            metric->nvmlReturn = NVML_SUCCESS;
            metric->value = strtod(text, NULL);
        }
        metric->metricInfo.shortName = NULL;
        metric->metricInfo.longName = NULL;
        metric->metricInfo.unit = NULL;
    }
    pthread_mutex_unlock(&lock);
    return NVML_SUCCESS;
}

/* ---- PCIe and NVLink link state ------------------------------------------------------------- */

static nvmlReturn_t read_uint(nvmlDevice_t device, const char *function, const char *key, unsigned int *out) {
    unsigned long long value;
    nvmlReturn_t result = read_ull(device, function, key, &value);
    if (result == NVML_SUCCESS) {
        *out = (unsigned int)value;
    }
    return result;
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int *value) {
    return read_uint(device, "pcie_link", "pcie_gen", value);
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int *value) {
    return read_uint(device, "pcie_link", "pcie_width", value);
}

nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int *value) {
    return read_uint(device, "pcie_link", "pcie_max_gen", value);
}

nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device, unsigned int *value) {
    return read_uint(device, "pcie_link", "pcie_max_width", value);
}

nvmlReturn_t nvmlDeviceGetGpuMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int *value) {
    return read_uint(device, "pcie_link", "pcie_gpu_max_gen", value);
}

nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int *value) {
    return read_uint(device, "pcie_replay", "pcie_replay", value);
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, nvmlEnableState_t *is_active) {
    pthread_mutex_lock(&lock);
    CHECK(device, "nvlink");
    const char *text = gpu_value(device->index, "nvlink_states");
    nvmlReturn_t result = NVML_ERROR_NOT_SUPPORTED;
    if (text != NULL) {
        result = NVML_ERROR_INVALID_ARGUMENT;
        for (unsigned int i = 0; *text != '\0'; i++) {
            char *end;
            unsigned long state = strtoul(text, &end, 10);
            if (end == text) {
                break;
            }
            if (i == link) {
                *is_active = state ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
                result = NVML_SUCCESS;
                break;
            }
            text = *end == ',' ? end + 1 : end;
        }
    }
    pthread_mutex_unlock(&lock);
    return result;
}

nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t device, unsigned int link, nvmlNvLinkErrorCounter_t counter,
                                             unsigned long long *value) {
    char key[64];
    snprintf(key, sizeof key, "nvlink_error.%u.%d", link, (int)counter);
    pthread_mutex_lock(&lock);
    CHECK(device, "nvlink");
    if (!gpu_ull(device->index, key, value)) {
        *value = 0; /* a link NVML knows counts from zero */
    }
    nvmlReturn_t result = gpu_value(device->index, "nvlink_states") != NULL ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
    pthread_mutex_unlock(&lock);
    return result;
}

nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, nvmlGpuFabricInfoV_t *info) {
    if (info == NULL || info->version != nvmlGpuFabricInfo_v3) {
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    }
    unsigned long long mask;
    nvmlReturn_t result = read_ull(device, "fabric", "fabric_health_mask", &mask);
    if (result == NVML_SUCCESS) {
        info->state = NVML_GPU_FABRIC_STATE_COMPLETED;
        info->status = NVML_SUCCESS;
        info->healthMask = (unsigned int)mask;
    }
    return result;
}
