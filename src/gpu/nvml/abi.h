// kgpu's own declarations of the subset of the NVML C ABI it uses (x86-64 Linux).
//
// Written from the interface facts in specs/nvml-abi.md, not from NVIDIA's header. Both the
// loader (src/gpu/nvml/library.*) and the fake library (tools/fake-nvml) use this one file, and
// every struct's size and field offsets are pinned by static_asserts below, so a layout mistake
// cannot hide behind a fake that shares it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kgpu::nvml {

using Return = int;  // nvmlReturn_t

// nvmlReturn_t values.
inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorUninitialized = 1;
inline constexpr Return kErrorInvalidArgument = 2;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorNoPermission = 4;
inline constexpr Return kErrorAlreadyInitialized = 5;
inline constexpr Return kErrorNotFound = 6;
inline constexpr Return kErrorInsufficientSize = 7;
inline constexpr Return kErrorInsufficientPower = 8;
inline constexpr Return kErrorDriverNotLoaded = 9;
inline constexpr Return kErrorTimeout = 10;
inline constexpr Return kErrorIrqIssue = 11;
inline constexpr Return kErrorLibraryNotFound = 12;
inline constexpr Return kErrorFunctionNotFound = 13;
inline constexpr Return kErrorCorruptedInforom = 14;
inline constexpr Return kErrorGpuIsLost = 15;
inline constexpr Return kErrorResetRequired = 16;
inline constexpr Return kErrorOperatingSystem = 17;
inline constexpr Return kErrorLibRmVersionMismatch = 18;
inline constexpr Return kErrorInUse = 19;
inline constexpr Return kErrorMemory = 20;
inline constexpr Return kErrorNoData = 21;
inline constexpr Return kErrorVgpuEccNotEnabled = 22;
inline constexpr Return kErrorInsufficientResources = 23;
inline constexpr Return kErrorFreqNotSupported = 24;
inline constexpr Return kErrorArgumentVersionMismatch = 25;
inline constexpr Return kErrorDeprecated = 26;
inline constexpr Return kErrorNotReady = 27;
inline constexpr Return kErrorGpuNotFound = 28;
inline constexpr Return kErrorInvalidState = 29;
inline constexpr Return kErrorUnknown = 999;

// Symbolic name of a return code ("GPU_IS_LOST"), or "UNKNOWN_<n>"; never null.
const char* return_name(Return r);
// Parses a symbolic name ("GPU_IS_LOST", also with an "NVML_ERROR_" prefix); -1 if unknown.
Return return_from_name(const char* name);

// Opaque handles.
using Device = struct DeviceOpaque*;
using EventSet = struct EventSetOpaque*;
using GpuInstance = struct GpuInstanceOpaque*;
using ComputeInstance = struct ComputeInstanceOpaque*;
using GpmSample = struct GpmSampleOpaque*;

inline constexpr unsigned kInitFlagNoGpus = 1;

// nvmlGpuFabricInfo_t (nvmlDeviceGetGpuFabricInfo): a GPU's place in an NVLink fabric (multi-node
// NVLink, IMEX). `state` is nvmlGpuFabricState_t, one byte.
inline constexpr unsigned kGpuFabricUuidLen = 16;
inline constexpr unsigned char kGpuFabricStateNotSupported = 0;
inline constexpr unsigned char kGpuFabricStateNotStarted = 1;
inline constexpr unsigned char kGpuFabricStateInProgress = 2;
inline constexpr unsigned char kGpuFabricStateCompleted = 3;
struct GpuFabricInfo {
  unsigned char clusterUuid[kGpuFabricUuidLen];
  Return status;
  unsigned int cliqueId;
  unsigned char state;
};

// nvmlGpuVirtualizationMode_t (nvmlDeviceGetVirtualizationMode).
inline constexpr int kVirtualizationNone = 0;
inline constexpr int kVirtualizationPassthrough = 1;
inline constexpr int kVirtualizationVgpu = 2;  // a vGPU, seen from the guest
inline constexpr int kVirtualizationHostVgpu = 3;
inline constexpr int kVirtualizationHostVsga = 4;
inline constexpr unsigned kInitFlagNoAttach = 2;

inline constexpr unsigned kSystemDriverVersionBufferSize = 80;
inline constexpr unsigned kSystemNvmlVersionBufferSize = 80;
inline constexpr unsigned kDeviceNameBufferSize = 96;
inline constexpr unsigned kDeviceUuidBufferSize = 96;
inline constexpr unsigned kDeviceSerialBufferSize = 30;

// nvmlDeviceArchitecture_t
inline constexpr unsigned kArchKepler = 2;
inline constexpr unsigned kArchMaxwell = 3;
inline constexpr unsigned kArchPascal = 4;
inline constexpr unsigned kArchVolta = 5;
inline constexpr unsigned kArchTuring = 6;
inline constexpr unsigned kArchAmpere = 7;
inline constexpr unsigned kArchAda = 8;
inline constexpr unsigned kArchHopper = 9;
inline constexpr unsigned kArchBlackwell = 10;
inline constexpr unsigned kArchRubin = 13;
inline constexpr unsigned kArchUnknown = 0xffffffffu;

// nvmlBrandType_t
inline constexpr unsigned kBrandTesla = 2;
inline constexpr unsigned kBrandNvidia = 14;

inline constexpr int kTemperatureGpu = 0;
inline constexpr int kClockGraphics = 0;
inline constexpr int kClockSm = 1;
inline constexpr int kClockMem = 2;
inline constexpr int kClockVideo = 3;

// nvmlMemoryErrorType_t / nvmlEccCounterType_t
inline constexpr int kMemoryErrorCorrected = 0;
inline constexpr int kMemoryErrorUncorrected = 1;
inline constexpr int kVolatileEcc = 0;
inline constexpr int kAggregateEcc = 1;

// nvmlClocksEventReasons bits that mean a slowdown the hardware or driver imposed.
inline constexpr unsigned long long kClocksEventSwThermal = 0x20;
inline constexpr unsigned long long kClocksEventHwThermal = 0x40;
inline constexpr unsigned long long kClocksEventHwPowerBrake = 0x80;

inline constexpr int kComputeModeDefault = 0;
inline constexpr int kComputeModeProhibited = 2;
inline constexpr int kComputeModeExclusiveProcess = 3;

// Event types.
inline constexpr unsigned long long kEventSingleBitEccError = 0x1;
inline constexpr unsigned long long kEventDoubleBitEccError = 0x2;
inline constexpr unsigned long long kEventXidCriticalError = 0x8;

inline constexpr unsigned kMigEnable = 1;
inline constexpr unsigned kMigDisable = 0;

// GPU-instance profile indices for nvmlDeviceGetGpuInstanceProfileInfo.
inline constexpr unsigned kGpuInstanceProfile1Slice = 0;
inline constexpr unsigned kGpuInstanceProfile2Slice = 1;
inline constexpr unsigned kGpuInstanceProfile3Slice = 2;
inline constexpr unsigned kGpuInstanceProfile4Slice = 3;
inline constexpr unsigned kGpuInstanceProfile7Slice = 4;
inline constexpr unsigned kGpuInstanceProfile8Slice = 5;
inline constexpr unsigned kGpuInstanceProfile6Slice = 6;
inline constexpr unsigned kGpuInstanceProfile1SliceRev1 = 7;  // 1 slice + media engines
inline constexpr unsigned kGpuInstanceProfile2SliceRev1 = 8;
inline constexpr unsigned kGpuInstanceProfile1SliceRev2 = 9;  // 1 slice, double memory
inline constexpr unsigned kGpuInstanceProfileCount = 10;
// Compute-instance profile indices (nvmlGpuInstanceGetComputeInstanceProfileInfo) and the one
// engine profile.
inline constexpr unsigned kComputeInstanceProfile1Slice = 0;
inline constexpr unsigned kComputeInstanceProfile2Slice = 1;
inline constexpr unsigned kComputeInstanceProfile3Slice = 2;
inline constexpr unsigned kComputeInstanceProfile4Slice = 3;
inline constexpr unsigned kComputeInstanceProfile7Slice = 4;
inline constexpr unsigned kComputeInstanceProfile8Slice = 5;
inline constexpr unsigned kComputeInstanceProfile6Slice = 6;
inline constexpr unsigned kComputeInstanceProfile1SliceRev1 = 7;
inline constexpr unsigned kComputeInstanceProfileCount = 8;
inline constexpr unsigned kComputeInstanceEngineProfileShared = 0;

// nvmlGpuTopologyLevel_t
inline constexpr int kTopologyInternal = 0;
inline constexpr int kTopologySingle = 10;
inline constexpr int kTopologyMultiple = 20;
inline constexpr int kTopologyHostBridge = 30;
inline constexpr int kTopologyNode = 40;
inline constexpr int kTopologySystem = 50;

inline constexpr unsigned kNvLinkMaxLinks = 18;

// Field ids for nvmlDeviceGetFieldValues.
inline constexpr unsigned kFieldMemoryTemp = 82;
inline constexpr unsigned kFieldTotalEnergyConsumption = 83;
inline constexpr unsigned kFieldPcieReplayCounter = 94;
inline constexpr unsigned kFieldNvLinkThroughputDataTx = 138;
inline constexpr unsigned kFieldNvLinkThroughputDataRx = 139;
inline constexpr unsigned kFieldRemappedCor = 142;
inline constexpr unsigned kFieldRemappedUnc = 143;
inline constexpr unsigned kFieldRemappedPending = 144;
inline constexpr unsigned kFieldRemappedFailure = 145;
inline constexpr unsigned kFieldPowerInstant = 186;
inline constexpr unsigned kFieldGpuRecoveryAction = 230;  // nvmlDeviceGpuRecoveryAction_t as kValueUInt
inline constexpr unsigned kFieldScopeAllLinks = 0xFFFFFFFFu;

// nvmlDetachGpuState_t and nvmlPcieLinkState_t (nvmlDeviceRemoveGpu_v2); nvmlEnableState_t.
inline constexpr int kDetachGpuKeep = 0;
inline constexpr int kDetachGpuRemove = 1;
inline constexpr int kPcieLinkKeep = 0;
inline constexpr int kFeatureDisabled = 0;
inline constexpr int kFeatureEnabled = 1;

// nvmlValueType_t
inline constexpr int kValueDouble = 0;
inline constexpr int kValueUInt = 1;
inline constexpr int kValueULong = 2;
inline constexpr int kValueULongLong = 3;
inline constexpr int kValueSLongLong = 4;
inline constexpr int kValueSInt = 5;
inline constexpr int kValueUShort = 6;

// GPM metric ids.
inline constexpr unsigned kGpmGraphicsUtil = 1;
inline constexpr unsigned kGpmAnyTensorUtil = 5;
inline constexpr unsigned kGpmDramBwUtil = 10;
inline constexpr unsigned kGpmPcieTxPerSec = 20;
inline constexpr unsigned kGpmPcieRxPerSec = 21;
inline constexpr unsigned kGpmSupportVersion = 1;
inline constexpr unsigned kGpmMetricsGetVersion = 1;

// Reported instead of a value NVML does not have (e.g. a process's memory under some drivers).
inline constexpr unsigned long long kValueNotAvailableULL = ~0ULL;
inline constexpr unsigned kInstanceIdNone = 0xFFFFFFFFu;

struct Memory {  // nvmlMemory_t
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct MemoryV2 {  // nvmlMemory_v2_t
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
};
inline constexpr unsigned kMemoryV2Version = static_cast<unsigned>(sizeof(MemoryV2)) | (2u << 24);

struct Utilization {  // nvmlUtilization_t
  unsigned int gpu;
  unsigned int memory;
};

struct ProcessInfo {  // nvmlProcessInfo_t (v2), used by the _v3 process queries
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

struct ProcessUtilizationSample {  // nvmlProcessUtilizationSample_t
  unsigned int pid;
  unsigned long long timeStamp;  // microseconds
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
};

struct EventData {  // nvmlEventData_t
  Device device;
  unsigned long long eventType;
  unsigned long long eventData;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

struct PciInfo {  // nvmlPciInfo_t
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;  // device id << 16 | vendor id
  unsigned int pciSubSystemId;
  char busId[32];
};

union Value {  // nvmlValue_t
  double dVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  signed long long sllVal;
  signed int siVal;
  unsigned short usVal;
};

struct FieldValue {  // nvmlFieldValue_t
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;
  long long latencyUsec;
  int valueType;
  Return nvmlReturn;
  Value value;
};

struct GpuInstanceProfileInfo {  // nvmlGpuInstanceProfileInfo_t
  unsigned int id;
  unsigned int isP2pSupported;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int copyEngineCount;
  unsigned int decoderCount;
  unsigned int encoderCount;
  unsigned int jpegCount;
  unsigned int ofaCount;
  unsigned long long memorySizeMB;
};

struct GpuInstancePlacement {  // nvmlGpuInstancePlacement_t
  unsigned int start;
  unsigned int size;
};

struct GpuInstanceInfo {  // nvmlGpuInstanceInfo_t
  Device device;
  unsigned int id;
  unsigned int profileId;
  GpuInstancePlacement placement;
};

struct ComputeInstanceProfileInfo {  // nvmlComputeInstanceProfileInfo_t
  unsigned int id;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
};

struct DeviceAttributes {  // nvmlDeviceAttributes_t
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
  unsigned int gpuInstanceSliceCount;
  unsigned int computeInstanceSliceCount;
  unsigned long long memorySizeMB;
};

struct GpmSupport {  // nvmlGpmSupport_t
  unsigned int version;
  unsigned int isSupportedDevice;
};

struct GpmMetric {  // nvmlGpmMetric_t
  unsigned int metricId;
  Return nvmlReturn;
  double value;
  char* shortName;
  char* longName;
  char* unit;
};

// nvmlGpmMetricsGet_t. The real declaration's metrics[] bound has grown across drivers while the
// version stayed 1; callers fill only numMetrics entries, so any bound >= what we pass is safe.
inline constexpr unsigned kGpmMetricsMax = 8;
struct GpmMetricsGet {
  unsigned int version;
  unsigned int numMetrics;
  GpmSample sample1;
  GpmSample sample2;
  GpmMetric metrics[kGpmMetricsMax];
};

static_assert(sizeof(Memory) == 24);
static_assert(sizeof(MemoryV2) == 40 && offsetof(MemoryV2, total) == 8 && offsetof(MemoryV2, used) == 32);
static_assert(kMemoryV2Version == 0x02000028u);
static_assert(sizeof(Utilization) == 8);
static_assert(sizeof(ProcessInfo) == 24 && offsetof(ProcessInfo, usedGpuMemory) == 8 &&
              offsetof(ProcessInfo, gpuInstanceId) == 16 && offsetof(ProcessInfo, computeInstanceId) == 20);
static_assert(sizeof(ProcessUtilizationSample) == 32 && offsetof(ProcessUtilizationSample, timeStamp) == 8 &&
              offsetof(ProcessUtilizationSample, smUtil) == 16 && offsetof(ProcessUtilizationSample, decUtil) == 28);
static_assert(sizeof(EventData) == 32 && offsetof(EventData, eventType) == 8 && offsetof(EventData, eventData) == 16 &&
              offsetof(EventData, gpuInstanceId) == 24 && offsetof(EventData, computeInstanceId) == 28);
static_assert(sizeof(PciInfo) == 68 && offsetof(PciInfo, domain) == 16 && offsetof(PciInfo, pciDeviceId) == 28 &&
              offsetof(PciInfo, busId) == 36);
static_assert(sizeof(FieldValue) == 40 && offsetof(FieldValue, timestamp) == 8 &&
              offsetof(FieldValue, valueType) == 24 && offsetof(FieldValue, nvmlReturn) == 28 &&
              offsetof(FieldValue, value) == 32);
static_assert(sizeof(GpuInstanceProfileInfo) == 48 && offsetof(GpuInstanceProfileInfo, memorySizeMB) == 40);
static_assert(sizeof(GpuInstancePlacement) == 8);
static_assert(sizeof(ComputeInstanceProfileInfo) == 36 && offsetof(ComputeInstanceProfileInfo, sharedOfaCount) == 32);
static_assert(sizeof(GpuInstanceInfo) == 24 && offsetof(GpuInstanceInfo, id) == 8 &&
              offsetof(GpuInstanceInfo, placement) == 16);
static_assert(sizeof(DeviceAttributes) == 40 && offsetof(DeviceAttributes, gpuInstanceSliceCount) == 24 &&
              offsetof(DeviceAttributes, memorySizeMB) == 32);
static_assert(sizeof(GpmSupport) == 8);
static_assert(sizeof(GpuFabricInfo) == 28 && offsetof(GpuFabricInfo, status) == 16 &&
              offsetof(GpuFabricInfo, cliqueId) == 20 && offsetof(GpuFabricInfo, state) == 24);
static_assert(sizeof(GpmMetric) == 40 && offsetof(GpmMetric, value) == 8 && offsetof(GpmMetric, unit) == 32);
static_assert(offsetof(GpmMetricsGet, sample1) == 8 && offsetof(GpmMetricsGet, metrics) == 24);

// Every NVML function kgpu uses: X(symbol, parameter list). All return Return.
// The loader resolves each by name; the fake library defines each with exactly this signature.
#define KGPU_NVML_FUNCTIONS(X)                                                                                      \
  X(nvmlInit_v2, (void))                                                                                            \
  X(nvmlInitWithFlags, (unsigned int flags))                                                                        \
  X(nvmlShutdown, (void))                                                                                           \
  X(nvmlSystemGetDriverVersion, (char* version, unsigned int length))                                               \
  X(nvmlSystemGetNVMLVersion, (char* version, unsigned int length))                                                 \
  X(nvmlSystemGetCudaDriverVersion_v2, (int* cudaDriverVersion))                                                    \
  X(nvmlDeviceGetCount_v2, (unsigned int* deviceCount))                                                             \
  X(nvmlDeviceGetHandleByIndex_v2, (unsigned int index, kgpu::nvml::Device* device))                                \
  X(nvmlDeviceGetHandleByUUID, (const char* uuid, kgpu::nvml::Device* device))                                      \
  X(nvmlDeviceGetIndex, (kgpu::nvml::Device device, unsigned int* index))                                           \
  X(nvmlDeviceGetName, (kgpu::nvml::Device device, char* name, unsigned int length))                                \
  X(nvmlDeviceGetUUID, (kgpu::nvml::Device device, char* uuid, unsigned int length))                                \
  X(nvmlDeviceGetSerial, (kgpu::nvml::Device device, char* serial, unsigned int length))                            \
  X(nvmlDeviceGetPciInfo_v3, (kgpu::nvml::Device device, kgpu::nvml::PciInfo * pci))                                \
  X(nvmlDeviceGetMinorNumber, (kgpu::nvml::Device device, unsigned int* minorNumber))                               \
  X(nvmlDeviceGetArchitecture, (kgpu::nvml::Device device, unsigned int* arch))                                     \
  X(nvmlDeviceGetBrand, (kgpu::nvml::Device device, unsigned int* type))                                            \
  X(nvmlDeviceGetCudaComputeCapability, (kgpu::nvml::Device device, int* major, int* minor))                        \
  X(nvmlDeviceGetNumaNodeId, (kgpu::nvml::Device device, unsigned int* node))                                       \
  X(nvmlDeviceGetMemoryInfo, (kgpu::nvml::Device device, kgpu::nvml::Memory * memory))                              \
  X(nvmlDeviceGetMemoryInfo_v2, (kgpu::nvml::Device device, kgpu::nvml::MemoryV2 * memory))                         \
  X(nvmlDeviceGetUtilizationRates, (kgpu::nvml::Device device, kgpu::nvml::Utilization * utilization))              \
  X(nvmlDeviceGetEncoderUtilization, (kgpu::nvml::Device device, unsigned int* util, unsigned int* periodUs))       \
  X(nvmlDeviceGetDecoderUtilization, (kgpu::nvml::Device device, unsigned int* util, unsigned int* periodUs))       \
  X(nvmlDeviceGetTemperature, (kgpu::nvml::Device device, int sensorType, unsigned int* temp))                      \
  X(nvmlDeviceGetPowerUsage, (kgpu::nvml::Device device, unsigned int* milliwatts))                                 \
  X(nvmlDeviceGetPowerManagementLimit, (kgpu::nvml::Device device, unsigned int* milliwatts))                       \
  X(nvmlDeviceGetTotalEnergyConsumption, (kgpu::nvml::Device device, unsigned long long* millijoules))              \
  X(nvmlDeviceGetClockInfo, (kgpu::nvml::Device device, int type, unsigned int* mhz))                               \
  X(nvmlDeviceGetMaxClockInfo, (kgpu::nvml::Device device, int type, unsigned int* mhz))                            \
  X(nvmlDeviceGetPcieReplayCounter, (kgpu::nvml::Device device, unsigned int* value))                               \
  X(nvmlDeviceGetRemappedRows, (kgpu::nvml::Device device, unsigned int* corrRows, unsigned int* uncRows,           \
                                unsigned int* isPending, unsigned int* failureOccurred))                            \
  X(nvmlDeviceGetTotalEccErrors,                                                                                    \
    (kgpu::nvml::Device device, int errorType, int counterType, unsigned long long* count))                         \
  X(nvmlDeviceGetFieldValues, (kgpu::nvml::Device device, int valuesCount, kgpu::nvml::FieldValue* values))         \
  X(nvmlDeviceGetComputeMode, (kgpu::nvml::Device device, int* mode))                                               \
  X(nvmlDeviceGetPersistenceMode, (kgpu::nvml::Device device, int* enabled))                                        \
  X(nvmlDeviceSetPersistenceMode, (kgpu::nvml::Device device, int mode))                                            \
  X(nvmlDeviceModifyDrainState, (kgpu::nvml::PciInfo * pci, int newState))                                          \
  X(nvmlDeviceQueryDrainState, (kgpu::nvml::PciInfo * pci, int* currentState))                                      \
  X(nvmlDeviceRemoveGpu_v2, (kgpu::nvml::PciInfo * pci, int gpuState, int linkState))                               \
  X(nvmlDeviceDiscoverGpus, (kgpu::nvml::PciInfo * pci))                                                            \
  X(nvmlDeviceGetGpuFabricInfo, (kgpu::nvml::Device device, kgpu::nvml::GpuFabricInfo * info))                      \
  X(nvmlDeviceGetVirtualizationMode, (kgpu::nvml::Device device, int* mode))                                        \
  X(nvmlDeviceGetCurrentClocksEventReasons, (kgpu::nvml::Device device, unsigned long long* reasons))               \
  X(nvmlDeviceGetComputeRunningProcesses_v3,                                                                        \
    (kgpu::nvml::Device device, unsigned int* infoCount, kgpu::nvml::ProcessInfo* infos))                           \
  X(nvmlDeviceGetProcessUtilization, (kgpu::nvml::Device device, kgpu::nvml::ProcessUtilizationSample * samples,    \
                                      unsigned int* count, unsigned long long lastSeenTimeStampUs))                 \
  X(nvmlEventSetCreate, (kgpu::nvml::EventSet * set))                                                               \
  X(nvmlDeviceGetSupportedEventTypes, (kgpu::nvml::Device device, unsigned long long* eventTypes))                  \
  X(nvmlDeviceRegisterEvents, (kgpu::nvml::Device device, unsigned long long eventTypes, kgpu::nvml::EventSet set)) \
  X(nvmlEventSetWait_v2, (kgpu::nvml::EventSet set, kgpu::nvml::EventData * data, unsigned int timeoutMs))          \
  X(nvmlEventSetFree, (kgpu::nvml::EventSet set))                                                                   \
  X(nvmlDeviceGetMigMode, (kgpu::nvml::Device device, unsigned int* currentMode, unsigned int* pendingMode))        \
  X(nvmlDeviceGetMaxMigDeviceCount, (kgpu::nvml::Device device, unsigned int* count))                               \
  X(nvmlDeviceGetMigDeviceHandleByIndex,                                                                            \
    (kgpu::nvml::Device device, unsigned int index, kgpu::nvml::Device* migDevice))                                 \
  X(nvmlDeviceGetDeviceHandleFromMigDeviceHandle, (kgpu::nvml::Device migDevice, kgpu::nvml::Device * device))      \
  X(nvmlDeviceIsMigDeviceHandle, (kgpu::nvml::Device device, unsigned int* isMigDevice))                            \
  X(nvmlDeviceGetGpuInstanceId, (kgpu::nvml::Device migDevice, unsigned int* id))                                   \
  X(nvmlDeviceGetComputeInstanceId, (kgpu::nvml::Device migDevice, unsigned int* id))                               \
  X(nvmlDeviceGetGpuInstanceProfileInfo,                                                                            \
    (kgpu::nvml::Device device, unsigned int profile, kgpu::nvml::GpuInstanceProfileInfo* info))                    \
  X(nvmlDeviceGetGpuInstances,                                                                                      \
    (kgpu::nvml::Device device, unsigned int profileId, kgpu::nvml::GpuInstance* instances, unsigned int* count))   \
  X(nvmlGpuInstanceGetInfo, (kgpu::nvml::GpuInstance instance, kgpu::nvml::GpuInstanceInfo * info))                 \
  X(nvmlDeviceSetMigMode, (kgpu::nvml::Device device, unsigned int mode, kgpu::nvml::Return* activationStatus))     \
  X(nvmlDeviceGetGpuInstancePossiblePlacements_v2,                                                                  \
    (kgpu::nvml::Device device, unsigned int profileId, kgpu::nvml::GpuInstancePlacement* placements,               \
     unsigned int* count))                                                                                          \
  X(nvmlDeviceCreateGpuInstanceWithPlacement,                                                                       \
    (kgpu::nvml::Device device, unsigned int profileId, const kgpu::nvml::GpuInstancePlacement* placement,          \
     kgpu::nvml::GpuInstance* instance))                                                                            \
  X(nvmlGpuInstanceDestroy, (kgpu::nvml::GpuInstance instance))                                                     \
  X(nvmlGpuInstanceGetComputeInstanceProfileInfo,                                                                   \
    (kgpu::nvml::GpuInstance instance, unsigned int profile, unsigned int engProfile,                               \
     kgpu::nvml::ComputeInstanceProfileInfo* info))                                                                 \
  X(nvmlGpuInstanceCreateComputeInstance,                                                                           \
    (kgpu::nvml::GpuInstance instance, unsigned int profileId, kgpu::nvml::ComputeInstance* computeInstance))       \
  X(nvmlGpuInstanceGetComputeInstances,                                                                             \
    (kgpu::nvml::GpuInstance instance, unsigned int profileId, kgpu::nvml::ComputeInstance* computeInstances,      \
     unsigned int* count))                                                                                          \
  X(nvmlComputeInstanceDestroy, (kgpu::nvml::ComputeInstance computeInstance))                                      \
  X(nvmlDeviceGetAttributes_v2, (kgpu::nvml::Device device, kgpu::nvml::DeviceAttributes * attributes))             \
  X(nvmlDeviceGetTopologyCommonAncestor, (kgpu::nvml::Device a, kgpu::nvml::Device b, int* level))                  \
  X(nvmlDeviceGetNvLinkState, (kgpu::nvml::Device device, unsigned int link, int* isActive))                        \
  X(nvmlDeviceGetNvLinkRemotePciInfo_v2, (kgpu::nvml::Device device, unsigned int link, kgpu::nvml::PciInfo* pci))  \
  X(nvmlGpmQueryDeviceSupport, (kgpu::nvml::Device device, kgpu::nvml::GpmSupport * support))                       \
  X(nvmlGpmSampleAlloc, (kgpu::nvml::GpmSample * sample))                                                           \
  X(nvmlGpmSampleFree, (kgpu::nvml::GpmSample sample))                                                              \
  X(nvmlGpmSampleGet, (kgpu::nvml::Device device, kgpu::nvml::GpmSample sample))                                    \
  X(nvmlGpmMigSampleGet, (kgpu::nvml::Device device, unsigned int gpuInstanceId, kgpu::nvml::GpmSample sample))     \
  X(nvmlGpmMetricsGet, (kgpu::nvml::GpmMetricsGet * metricsGet))

// Function-pointer types: kgpu::nvml::fn::nvmlInit_v2 etc.
namespace fn {
#define KGPU_NVML_DECLARE_FN_TYPE(name, params) using name = kgpu::nvml::Return(*) params;
KGPU_NVML_FUNCTIONS(KGPU_NVML_DECLARE_FN_TYPE)
#undef KGPU_NVML_DECLARE_FN_TYPE
using nvmlErrorString = const char* (*)(kgpu::nvml::Return);
}  // namespace fn

}  // namespace kgpu::nvml
