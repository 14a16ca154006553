// nvml_api.hpp — the part of NVIDIA's NVML C API the collector calls, declared from NVIDIA's public nvml.h
// (as published in github.com/NVIDIA/go-nvml, pkg/nvml/nvml.h): return codes, opaque handles, the structs
// passed by pointer, and one function-pointer type per entry point. The library is loaded at run time
// (nvml_library.hpp), so nothing here links against it and no NVIDIA header is needed to build.
#pragma once

#include <cstdint>

namespace kepler::collect::nvml {

// nvmlReturn_t values (nvml.h "nvmlReturn_enum").
using Return = int;
inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorUninitialized = 1;
inline constexpr Return kErrorInvalidArgument = 2;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorNoPermission = 4;
inline constexpr Return kErrorNotFound = 6;
inline constexpr Return kErrorInsufficientSize = 7;
inline constexpr Return kErrorDriverNotLoaded = 9;
inline constexpr Return kErrorFunctionNotFound = 13;
inline constexpr Return kErrorGpuIsLost = 15;
inline constexpr Return kErrorArgumentVersionMismatch = 25;
inline constexpr Return kErrorUnknown = 999;

// Buffer sizes (nvml.h nvmlConstants).
inline constexpr unsigned kUuidBufferSize = 96;           // NVML_DEVICE_UUID_V2_BUFFER_SIZE
inline constexpr unsigned kNameBufferSize = 96;           // NVML_DEVICE_NAME_V2_BUFFER_SIZE
inline constexpr unsigned kPciBusIdBufferSize = 32;       // NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE
inline constexpr unsigned kPciBusIdLegacyBufferSize = 16; // NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE
inline constexpr unsigned kSystemDriverVersionBufferSize = 80;
inline constexpr unsigned long long kValueNotAvailable = ~0ull;  // (unsigned long long)NVML_VALUE_NOT_AVAILABLE
inline constexpr unsigned kMigEnabled = 1;                        // NVML_DEVICE_MIG_ENABLE
inline constexpr unsigned kNoInstance = 0xFFFFFFFFu;              // gpuInstanceId outside MIG

struct DeviceOpaque;
using Device = DeviceOpaque*;  // nvmlDevice_t (struct nvmlDevice_st*)

struct PciInfo {  // nvmlPciInfo_t
    char busIdLegacy[kPciBusIdLegacyBufferSize];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[kPciBusIdBufferSize];
};

struct ProcessInfo {  // nvmlProcessInfo_t (nvmlProcessInfo_v2_st), as the *_v3 process calls fill it
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
};

struct ProcessUtilizationSample {  // nvmlProcessUtilizationSample_t
    unsigned int pid;
    unsigned long long timeStamp;  // CPU time stamp, µs (CLOCK_REALTIME)
    unsigned int smUtil;
    unsigned int memUtil;
    unsigned int encUtil;
    unsigned int decUtil;
};

// GPU Performance Monitoring (Hopper and later; nvml.h "GPM"): counters sampled per GPU or per MIG GPU
// instance, and metrics computed from two samples.
struct GpmSampleOpaque;
using GpmSample = GpmSampleOpaque*;                    // nvmlGpmSample_t
inline constexpr unsigned kGpmMetricGraphicsUtil = 1;  // NVML_GPM_METRIC_GRAPHICS_UTIL: % of time any app was active
inline constexpr unsigned kGpmMetricsGetVersion = 1;   // NVML_GPM_METRICS_GET_VERSION
inline constexpr unsigned kGpmSupportVersion = 1;      // NVML_GPM_SUPPORT_VERSION
// NVML_GPM_METRIC_MAX of the newest nvml.h (older headers say 98): the array is sized by the header the
// caller was built with, and the driver reads and writes only numMetrics entries of it.
inline constexpr unsigned kGpmMetricMax = 333;

struct GpmMetric {  // nvmlGpmMetric_t
    unsigned int metricId;
    Return nvmlReturn;
    double value;
    struct {
        char* shortName;
        char* longName;
        char* unit;
    } metricInfo;
};

struct GpmMetricsGet {  // nvmlGpmMetricsGet_t
    unsigned int version;
    unsigned int numMetrics;
    GpmSample sample1;
    GpmSample sample2;
    GpmMetric metrics[kGpmMetricMax];
};

struct GpmSupport {  // nvmlGpmSupport_t
    unsigned int version;
    unsigned int isSupportedDevice;
};

static_assert(sizeof(PciInfo) == 68, "nvmlPciInfo_t");
static_assert(sizeof(GpmMetric) == 40, "nvmlGpmMetric_t");
static_assert(sizeof(GpmMetricsGet) == 24 + 40 * kGpmMetricMax, "nvmlGpmMetricsGet_t");
static_assert(sizeof(ProcessInfo) == 24, "nvmlProcessInfo_t");
static_assert(sizeof(ProcessUtilizationSample) == 32, "nvmlProcessUtilizationSample_t");

// Entry points, by their exported names.
using InitFn = Return (*)();                                           // nvmlInit_v2
using ShutdownFn = Return (*)();                                       // nvmlShutdown
using ErrorStringFn = const char* (*)(Return);                         // nvmlErrorString
using SystemGetDriverVersionFn = Return (*)(char*, unsigned int);      // nvmlSystemGetDriverVersion
using DeviceGetCountFn = Return (*)(unsigned int*);                    // nvmlDeviceGetCount_v2
using DeviceGetHandleByIndexFn = Return (*)(unsigned int, Device*);    // nvmlDeviceGetHandleByIndex_v2
using DeviceGetTextFn = Return (*)(Device, char*, unsigned int);       // nvmlDeviceGetUUID, nvmlDeviceGetName
using DeviceGetPciInfoFn = Return (*)(Device, PciInfo*);               // nvmlDeviceGetPciInfo_v3
using DeviceGetUIntFn = Return (*)(Device, unsigned int*);             // PowerUsage, EnforcedPowerLimit, ...
using DeviceGetULongLongFn = Return (*)(Device, unsigned long long*);  // nvmlDeviceGetTotalEnergyConsumption
using DeviceGetMigModeFn = Return (*)(Device, unsigned int*, unsigned int*);
using DeviceGetProcessesFn = Return (*)(Device, unsigned int*, ProcessInfo*);  // *RunningProcesses_v3
using DeviceGetProcessUtilizationFn = Return (*)(Device, ProcessUtilizationSample*, unsigned int*, unsigned long long);
using DeviceGetMigDeviceHandleByIndexFn = Return (*)(Device, unsigned int, Device*);
using GpmQueryDeviceSupportFn = Return (*)(Device, GpmSupport*);          // nvmlGpmQueryDeviceSupport
using GpmSampleAllocFn = Return (*)(GpmSample*);                         // nvmlGpmSampleAlloc
using GpmSampleFreeFn = Return (*)(GpmSample);                           // nvmlGpmSampleFree
using GpmMigSampleGetFn = Return (*)(Device, unsigned int, GpmSample);   // nvmlGpmMigSampleGet
using GpmMetricsGetFn = Return (*)(GpmMetricsGet*);                      // nvmlGpmMetricsGet

}  // namespace kepler::collect::nvml
