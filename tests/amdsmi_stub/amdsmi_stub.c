/*
 * A stand-in for AMD SMI's libamd_smi.so, for tests on machines without an AMD GPU.
 *
 * Compiled against the real public header (include/amd_smi/amdsmi.h, ROCm/amdsmi tag rocm-6.2.2),
 * so every function here has exactly the signature and struct layout the real library has; the
 * real `amdsmi` Python binding (PyPI amdsmi 6.2.4, generated from that header) loads it through
 * $ROCM_PATH/lib/libamd_smi.so. The binding resolves every symbol of the API when it is imported:
 * the ones this file does not implement come from a generated unit (see __init__.py) that answers
 * AMDSMI_STATUS_NOT_SUPPORTED, as the real library does for a call the GPU cannot serve.
 *
 * The node is described by the flat key=value file named by $AMDSMI_STUB_STATE, read on every
 * call so a test can change it between collections:
 *   init_error=1                      amdsmi_init fails (AMDSMI_STATUS_INIT_ERROR)
 *   gpus=N                            how many GPUs the one socket has
 *   gpu.I.lost=1                      every per-GPU query of GPU I fails (AMDSMI_STATUS_NOT_FOUND)
 *   gpu.I.KEY=VALUE                   KEY one of uuid, market_name, bdf (DDDD:BB:DD.F),
 *                                     gfx_activity, umc_activity, mm_activity (percent),
 *                                     vram_total, vram_used (MB), current_socket_power,
 *                                     average_socket_power (W), temp_hotspot (C),
 *                                     ecc_correctable, ecc_uncorrectable, compute_partition,
 *                                     memory_partition, pids (comma-separated)
 * A KEY that is absent makes its query answer AMDSMI_STATUS_NOT_SUPPORTED.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <amd_smi/amdsmi.h>

#define SOCKET ((amdsmi_socket_handle)(uintptr_t)0x5000)

static int initialized = 0;

/* Copy the value of `key` into `out` (at most `size` bytes); 1 if found. */
static int state_get(const char *key, char *out, size_t size) {
    const char *path = getenv("AMDSMI_STUB_STATE");
    FILE *file;
    char line[1024];
    size_t key_len = strlen(key);
    int found = 0;
    if (path == NULL || (file = fopen(path, "r")) == NULL) {
        return 0;
    }
    while (fgets(line, sizeof line, file) != NULL) {
        if (strncmp(line, key, key_len) == 0 && line[key_len] == '=') {
            char *value = line + key_len + 1;
            value[strcspn(value, "\r\n")] = '\0';
            snprintf(out, size, "%s", value);
            found = 1;
        }
    }
    fclose(file);
    return found;
}

static int gpu_count(void) {
    char value[32];
    return state_get("gpus", value, sizeof value) ? atoi(value) : 0;
}

/* The GPU index of a handle, or -1 for a handle this library never gave out. */
static int gpu_of(amdsmi_processor_handle handle) {
    intptr_t index = (intptr_t)handle - 1;
    return index >= 0 && index < gpu_count() ? (int)index : -1;
}

/* Status of a per-GPU query of `key` on `handle`, the value in `out` when it succeeds. */
static amdsmi_status_t gpu_value(amdsmi_processor_handle handle, const char *key, char *out, size_t size) {
    char name[96], flag[8];
    int index;
    if (!initialized) {
        return AMDSMI_STATUS_NOT_INIT;
    }
    index = gpu_of(handle);
    if (index < 0) {
        return AMDSMI_STATUS_INVAL;
    }
    snprintf(name, sizeof name, "gpu.%d.lost", index);
    if (state_get(name, flag, sizeof flag) && atoi(flag)) {
        return AMDSMI_STATUS_NOT_FOUND;
    }
    snprintf(name, sizeof name, "gpu.%d.%s", index, key);
    return state_get(name, out, size) ? AMDSMI_STATUS_SUCCESS : AMDSMI_STATUS_NOT_SUPPORTED;
}

static amdsmi_status_t gpu_number(amdsmi_processor_handle handle, const char *key, uint64_t *out) {
    char value[64];
    amdsmi_status_t status = gpu_value(handle, key, value, sizeof value);
    if (status == AMDSMI_STATUS_SUCCESS) {
        *out = strtoull(value, NULL, 10);
    }
    return status;
}

amdsmi_status_t amdsmi_init(uint64_t init_flags) {
    char value[8];
    if (!(init_flags & AMDSMI_INIT_AMD_GPUS)) {
        return AMDSMI_STATUS_INVAL;
    }
    if (state_get("init_error", value, sizeof value) && atoi(value)) {
        return AMDSMI_STATUS_INIT_ERROR;
    }
    initialized = 1;
    return AMDSMI_STATUS_SUCCESS;
}

amdsmi_status_t amdsmi_shut_down(void) {
    initialized = 0;
    return AMDSMI_STATUS_SUCCESS;
}

amdsmi_status_t amdsmi_get_socket_handles(uint32_t *socket_count, amdsmi_socket_handle *socket_handles) {
    if (!initialized) {
        return AMDSMI_STATUS_NOT_INIT;
    }
    if (socket_count == NULL) {
        return AMDSMI_STATUS_INVAL;
    }
    if (socket_handles != NULL && *socket_count >= 1) {
        socket_handles[0] = SOCKET;
    }
    *socket_count = 1;
    return AMDSMI_STATUS_SUCCESS;
}

amdsmi_status_t amdsmi_get_processor_handles(amdsmi_socket_handle socket_handle, uint32_t *processor_count,
                                             amdsmi_processor_handle *processor_handles) {
    uint32_t count, i;
    if (!initialized) {
        return AMDSMI_STATUS_NOT_INIT;
    }
    if (socket_handle != SOCKET || processor_count == NULL) {
        return AMDSMI_STATUS_INVAL;
    }
    count = (uint32_t)gpu_count();
    if (processor_handles != NULL) {
        for (i = 0; i < count && i < *processor_count; i++) {
            processor_handles[i] = (amdsmi_processor_handle)(uintptr_t)(i + 1);
        }
    }
    *processor_count = count;
    return AMDSMI_STATUS_SUCCESS;
}

amdsmi_status_t amdsmi_get_gpu_device_uuid(amdsmi_processor_handle processor_handle, unsigned int *uuid_length,
                                           char *uuid) {
    char value[AMDSMI_GPU_UUID_SIZE];
    amdsmi_status_t status = gpu_value(processor_handle, "uuid", value, sizeof value);
    if (status != AMDSMI_STATUS_SUCCESS) {
        return status;
    }
    if (uuid_length == NULL || uuid == NULL || *uuid_length < strlen(value) + 1) {
        return AMDSMI_STATUS_INSUFFICIENT_SIZE;
    }
    snprintf(uuid, *uuid_length, "%s", value);
    *uuid_length = (unsigned int)strlen(value);
    return AMDSMI_STATUS_SUCCESS;
}

amdsmi_status_t amdsmi_get_gpu_asic_info(amdsmi_processor_handle processor_handle, amdsmi_asic_info_t *info) {
    char value[AMDSMI_256_LENGTH];
    amdsmi_status_t status = gpu_value(processor_handle, "market_name", value, sizeof value);
    if (status != AMDSMI_STATUS_SUCCESS) {
        return status;
    }
    memset(info, 0, sizeof *info);
    snprintf(info->market_name, sizeof info->market_name, "%s", value);
    info->vendor_id = 0x1002;
    snprintf(info->vendor_name, sizeof info->vendor_name, "Advanced Micro Devices Inc. [AMD/ATI]");
    info->oam_id = 0xFFFF;
    return AMDSMI_STATUS_SUCCESS;
}

amdsmi_status_t amdsmi_get_gpu_device_bdf(amdsmi_processor_handle processor_handle, amdsmi_bdf_t *bdf) {
    char value[32];
    unsigned int domain, bus, device, function;
    amdsmi_status_t status = gpu_value(processor_handle, "bdf", value, sizeof value);
    if (status != AMDSMI_STATUS_SUCCESS) {
        return status;
    }
    if (sscanf(value, "%x:%x:%x.%x", &domain, &bus, &device, &function) != 4) {
        return AMDSMI_STATUS_UNEXPECTED_DATA;
    }
    bdf->as_uint = 0;
    bdf->domain_number = domain;
    bdf->bus_number = bus;
    bdf->device_number = device;
    bdf->function_number = function;
    return AMDSMI_STATUS_SUCCESS;
}

amdsmi_status_t amdsmi_get_gpu_activity(amdsmi_processor_handle processor_handle, amdsmi_engine_usage_t *info) {
    uint64_t gfx, umc, mm;
    amdsmi_status_t status = gpu_number(processor_handle, "gfx_activity", &gfx);
    if (status != AMDSMI_STATUS_SUCCESS) {
        return status;
    }
    memset(info, 0, sizeof *info);
    info->gfx_activity = (uint32_t)gfx;
    /* The real library fills what the firmware has and writes 0xFFFF (N/A) for the rest. */
    info->umc_activity = gpu_number(processor_handle, "umc_activity", &umc) == AMDSMI_STATUS_SUCCESS ? (uint32_t)umc
                                                                                                     : 0xFFFF;
    info->mm_activity = gpu_number(processor_handle, "mm_activity", &mm) == AMDSMI_STATUS_SUCCESS ? (uint32_t)mm
                                                                                                  : 0xFFFF;
    return AMDSMI_STATUS_SUCCESS;
}

amdsmi_status_t amdsmi_get_gpu_vram_usage(amdsmi_processor_handle processor_handle, amdsmi_vram_usage_t *info) {
    uint64_t total, used;
    amdsmi_status_t status = gpu_number(processor_handle, "vram_total", &total);
    if (status == AMDSMI_STATUS_SUCCESS) {
        status = gpu_number(processor_handle, "vram_used", &used);
    }
    if (status != AMDSMI_STATUS_SUCCESS) {
        return status;
    }
    memset(info, 0, sizeof *info);
    info->vram_total = (uint32_t)total;
    info->vram_used = (uint32_t)used;
    return AMDSMI_STATUS_SUCCESS;
}

amdsmi_status_t amdsmi_get_power_info(amdsmi_processor_handle processor_handle, amdsmi_power_info_t *info) {
    uint64_t current = 0xFFFF, average = 0xFFFF;
    amdsmi_status_t current_status = gpu_number(processor_handle, "current_socket_power", &current);
    amdsmi_status_t average_status = gpu_number(processor_handle, "average_socket_power", &average);
    if (current_status != AMDSMI_STATUS_SUCCESS && average_status != AMDSMI_STATUS_SUCCESS) {
        return current_status;
    }
    memset(info, 0, sizeof *info);
    info->current_socket_power = (uint32_t)current;
    info->average_socket_power = (uint32_t)average;
    info->gfx_voltage = info->soc_voltage = info->mem_voltage = 0xFFFF;
    info->power_limit = 750;
    return AMDSMI_STATUS_SUCCESS;
}

amdsmi_status_t amdsmi_get_temp_metric(amdsmi_processor_handle processor_handle, amdsmi_temperature_type_t sensor_type,
                                       amdsmi_temperature_metric_t metric, int64_t *temperature) {
    uint64_t value;
    amdsmi_status_t status;
    if (sensor_type != AMDSMI_TEMPERATURE_TYPE_HOTSPOT || metric != AMDSMI_TEMP_CURRENT) {
        return initialized ? AMDSMI_STATUS_NOT_SUPPORTED : AMDSMI_STATUS_NOT_INIT;
    }
    status = gpu_number(processor_handle, "temp_hotspot", &value);
    if (status == AMDSMI_STATUS_SUCCESS) {
        *temperature = (int64_t)value;
    }
    return status;
}

amdsmi_status_t amdsmi_get_gpu_total_ecc_count(amdsmi_processor_handle processor_handle, amdsmi_error_count_t *ec) {
    uint64_t correctable, uncorrectable;
    amdsmi_status_t status = gpu_number(processor_handle, "ecc_correctable", &correctable);
    if (status == AMDSMI_STATUS_SUCCESS) {
        status = gpu_number(processor_handle, "ecc_uncorrectable", &uncorrectable);
    }
    if (status != AMDSMI_STATUS_SUCCESS) {
        return status;
    }
    memset(ec, 0, sizeof *ec);
    ec->correctable_count = correctable;
    ec->uncorrectable_count = uncorrectable;
    return AMDSMI_STATUS_SUCCESS;
}

static amdsmi_status_t partition(amdsmi_processor_handle handle, const char *key, char *out, uint32_t len) {
    char value[64];
    amdsmi_status_t status = gpu_value(handle, key, value, sizeof value);
    if (status != AMDSMI_STATUS_SUCCESS) {
        return status;
    }
    if (out == NULL || len < strlen(value) + 1) {
        return AMDSMI_STATUS_INSUFFICIENT_SIZE;
    }
    snprintf(out, len, "%s", value);
    return AMDSMI_STATUS_SUCCESS;
}

amdsmi_status_t amdsmi_get_gpu_compute_partition(amdsmi_processor_handle processor_handle, char *compute_partition,
                                                 uint32_t len) {
    return partition(processor_handle, "compute_partition", compute_partition, len);
}

amdsmi_status_t amdsmi_get_gpu_memory_partition(amdsmi_processor_handle processor_handle, char *memory_partition,
                                                uint32_t len) {
    return partition(processor_handle, "memory_partition", memory_partition, len);
}

amdsmi_status_t amdsmi_get_gpu_process_list(amdsmi_processor_handle processor_handle, uint32_t *max_processes,
                                            amdsmi_proc_info_t *list) {
    char value[512];
    char *cursor, *end;
    uint32_t count = 0;
    amdsmi_status_t status = gpu_value(processor_handle, "pids", value, sizeof value);
    if (status == AMDSMI_STATUS_NOT_SUPPORTED) {
        value[0] = '\0'; /* no key: no process on this GPU */
    } else if (status != AMDSMI_STATUS_SUCCESS) {
        return status;
    }
    if (max_processes == NULL) {
        return AMDSMI_STATUS_INVAL;
    }
    for (cursor = value; *cursor != '\0'; cursor = *end == ',' ? end + 1 : end) {
        unsigned long pid = strtoul(cursor, &end, 10);
        if (end == cursor) {
            break;
        }
        if (list != NULL && count < *max_processes) {
            memset(&list[count], 0, sizeof list[count]);
            list[count].pid = (amdsmi_process_handle_t)pid;
            snprintf(list[count].name, sizeof list[count].name, "python3");
        }
        count++;
    }
    if (list != NULL && count > *max_processes) {
        *max_processes = count;
        return AMDSMI_STATUS_OUT_OF_RESOURCES;
    }
    *max_processes = count;
    return AMDSMI_STATUS_SUCCESS;
}
