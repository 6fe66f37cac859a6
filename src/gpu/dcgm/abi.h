// kgpu's own declarations of the small part of DCGM's C API it calls (x86-64 Linux).
//
// Written from DCGM's public interface facts (entry point signatures, status codes, struct
// layouts, field ids, blank sentinels), not from NVIDIA's headers; only what kgpu uses. Both the
// loader (src/gpu/dcgm/library.*) and the fake library (tools/fake-dcgm) use this one file, and
// the layouts of the structs passed across the ABI are pinned by static_asserts below.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kgpu::dcgm {

using Return = int;  // dcgmReturn_t: 0 is success, errors are negative

inline constexpr Return kOk = 0;
inline constexpr Return kBadParam = -1;
inline constexpr Return kGenericError = -3;
inline constexpr Return kMemory = -4;
inline constexpr Return kNotConfigured = -5;
inline constexpr Return kNotSupported = -6;
inline constexpr Return kInitError = -7;
inline constexpr Return kNvmlError = -8;
inline constexpr Return kUninitialized = -10;
inline constexpr Return kTimeout = -11;
inline constexpr Return kVersionMismatch = -12;
inline constexpr Return kUnknownField = -13;
inline constexpr Return kNoData = -14;
inline constexpr Return kStaleData = -15;
inline constexpr Return kNotWatched = -16;
inline constexpr Return kNoPermission = -17;
inline constexpr Return kGpuIsLost = -18;
inline constexpr Return kResetRequired = -19;
inline constexpr Return kFunctionNotFound = -20;
inline constexpr Return kConnectionNotValid = -21;
inline constexpr Return kGpuNotSupported = -22;
inline constexpr Return kMaxLimit = -24;
inline constexpr Return kLibraryNotFound = -25;
inline constexpr Return kRequiresRoot = -29;
inline constexpr Return kModuleNotLoaded = -33;
inline constexpr Return kInUse = -34;
inline constexpr Return kGroupIsEmpty = -35;
inline constexpr Return kProfilingNotSupported = -36;
inline constexpr Return kProfilingLibraryError = -37;
inline constexpr Return kProfilingMultiPass = -38;
inline constexpr Return kInsufficientDriverVersion = -44;
inline constexpr Return kNvmlNotLoaded = -56;
inline constexpr Return kNvmlDriverTimeout = -57;

// Symbolic name of a status ("CONNECTION_NOT_VALID"), or "STATUS_<n>"; never null.
const char* return_name(Return r);
// Parses a symbolic name (also with a "DCGM_ST_" prefix); nullopt if unknown.
std::optional<Return> return_from_name(std::string_view name);

// Opaque identifiers (uintptr_t in DCGM's API).
using Handle = std::uintptr_t;
using GroupId = std::uintptr_t;
using FieldGroupId = std::uintptr_t;

inline constexpr int kOperationModeAuto = 1;      // DCGM updates watched fields by itself
inline constexpr int kGroupEmpty = 1;             // dcgmGroupCreate: start with no entities
inline constexpr int kEntityGpu = 1;              // dcgm_field_entity_group_t for a GPU
inline constexpr int kEntityGpuInstance = 4;      // ... for a MIG GPU instance (DCGM's own ids, not NVML's)
inline constexpr int kEntityComputeInstance = 5;  // ... for a MIG compute instance
inline constexpr unsigned kMaxDevices = 32;       // size of dcgmGetAllSupportedDevices' array
inline constexpr unsigned kDefaultPort = 5555;
inline constexpr unsigned kMaxStringLength = 256;
inline constexpr unsigned kMaxBlobLength = 4096;
inline constexpr unsigned kMaxFieldsPerGroup = 128;
inline constexpr unsigned kLiveData = 1;  // dcgmEntitiesGetLatestValues flag: read the driver now

// Field value types (fieldType).
inline constexpr unsigned short kTypeDouble = 'd';
inline constexpr unsigned short kTypeInt64 = 'i';
inline constexpr unsigned short kTypeString = 's';

// Sentinels: a value at or above the blank value is not a reading (blank, not found, not
// supported, not permissioned: blank + 0..3).
inline constexpr int64_t kInt64Blank = 0x7ffffffffffffff0LL;
inline constexpr double kDoubleBlank = 140737488355328.0;  // 2^47
inline constexpr const char* kStringBlank = "<<<NULL>>>";
inline bool is_blank(int64_t v) { return v >= kInt64Blank; }
inline bool is_blank(double v) { return v >= kDoubleBlank; }

// Field ids.
inline constexpr unsigned short kFieldGpuUuid = 54;
inline constexpr unsigned short kFieldProfGrEngineActive = 1001;
inline constexpr unsigned short kFieldProfSmActive = 1002;
inline constexpr unsigned short kFieldProfSmOccupancy = 1003;
inline constexpr unsigned short kFieldProfPipeTensorActive = 1004;
inline constexpr unsigned short kFieldProfDramActive = 1005;
inline constexpr unsigned short kFieldProfPipeFp64Active = 1006;
inline constexpr unsigned short kFieldProfPipeFp32Active = 1007;
inline constexpr unsigned short kFieldProfPipeFp16Active = 1008;
inline constexpr unsigned short kFieldProfPcieTxBytes = 1009;
inline constexpr unsigned short kFieldProfPcieRxBytes = 1010;
inline constexpr unsigned short kFieldProfNvlinkTxBytes = 1011;
inline constexpr unsigned short kFieldProfNvlinkRxBytes = 1012;

// The profiling (DCP) fields 1001..1012 with their exporter names.
struct ProfilingField {
  unsigned short id;
  const char* name;  // "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
};
inline constexpr ProfilingField kProfilingFields[] = {
    {kFieldProfGrEngineActive, "DCGM_FI_PROF_GR_ENGINE_ACTIVE"},
    {kFieldProfSmActive, "DCGM_FI_PROF_SM_ACTIVE"},
    {kFieldProfSmOccupancy, "DCGM_FI_PROF_SM_OCCUPANCY"},
    {kFieldProfPipeTensorActive, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"},
    {kFieldProfDramActive, "DCGM_FI_PROF_DRAM_ACTIVE"},
    {kFieldProfPipeFp64Active, "DCGM_FI_PROF_PIPE_FP64_ACTIVE"},
    {kFieldProfPipeFp32Active, "DCGM_FI_PROF_PIPE_FP32_ACTIVE"},
    {kFieldProfPipeFp16Active, "DCGM_FI_PROF_PIPE_FP16_ACTIVE"},
    {kFieldProfPcieTxBytes, "DCGM_FI_PROF_PCIE_TX_BYTES"},
    {kFieldProfPcieRxBytes, "DCGM_FI_PROF_PCIE_RX_BYTES"},
    {kFieldProfNvlinkTxBytes, "DCGM_FI_PROF_NVLINK_TX_BYTES"},
    {kFieldProfNvlinkRxBytes, "DCGM_FI_PROF_NVLINK_RX_BYTES"},
};
// The exporter name of a profiling field id, or null.
const char* profiling_field_name(unsigned short id);
// The id of a profiling field's exporter name ("DCGM_FI_PROF_SM_ACTIVE"), or 0.
unsigned short profiling_field_id(const char* name);

// Options of dcgmConnect_v2 (version 2 of the struct).
struct ConnectParams {
  unsigned version;
  unsigned persistAfterDisconnect;  // 0: the host engine drops our watches when we go
  unsigned timeoutMs;
  unsigned addressIsUnixSocket;
};
inline constexpr unsigned kConnectParamsVersion = sizeof(ConnectParams) | (2u << 24);

// An entity: group (kEntityGpu) and id (the DCGM GPU id).
struct EntityPair {
  int entityGroupId;
  unsigned entityId;
};

// One value of dcgmEntitiesGetLatestValues (version 2 of the struct).
struct FieldValue {
  unsigned version;
  int entityGroupId;
  unsigned entityId;
  unsigned short fieldId;
  unsigned short fieldType;  // kTypeDouble, kTypeInt64, kTypeString, ...
  int status;                // per value: kOk, kNotWatched, kGpuIsLost, ...
  unsigned unused;
  int64_t ts;  // microseconds since 1970
  union {
    int64_t i64;
    double dbl;
    char str[kMaxStringLength];
    char blob[kMaxBlobLength];
  } value;
};
inline constexpr unsigned kFieldValueVersion = sizeof(FieldValue) | (2u << 24);

// MIG placement of one GPU instance or compute instance, as dcgmGetGpuInstanceHierarchy reports it.
struct MigEntityInfo {
  char gpuUuid[128];               // the parent GPU's UUID
  unsigned nvmlGpuIndex;           // the parent GPU's NVML index
  unsigned nvmlInstanceId;         // NVML's GPU-instance id
  unsigned nvmlComputeInstanceId;  // NVML's compute-instance id; kNoMigId for a GPU instance
  unsigned nvmlMigProfileId;       // NVML's profile id of the instance
  unsigned nvmlProfileSlices;
};
inline constexpr unsigned kNoMigId = 0xffffffffu;

// One entity of the MIG hierarchy (version 2): the entity, its parent (a GPU for a GPU instance,
// a GPU instance for a compute instance) and where it sits.
struct MigHierarchyEntry {
  EntityPair entity;
  EntityPair parent;
  MigEntityInfo info;
};

// dcgmGetGpuInstanceHierarchy's answer (dcgmMigHierarchy_v2): `count` entries, GPU instances and
// compute instances of every MIG-enabled GPU. At most 14 instances per GPU (7 GPU + 7 compute).
inline constexpr unsigned kMaxHierarchyEntries = kMaxDevices * 14;
struct MigHierarchy {
  unsigned version;
  unsigned count;
  MigHierarchyEntry entityList[kMaxHierarchyEntries];
};
inline constexpr unsigned kMigHierarchyVersion = sizeof(MigHierarchy) | (2u << 24);

static_assert(sizeof(ConnectParams) == 16);
static_assert(sizeof(EntityPair) == 8 && offsetof(EntityPair, entityId) == 4);
static_assert(offsetof(FieldValue, entityGroupId) == 4);
static_assert(offsetof(FieldValue, entityId) == 8);
static_assert(offsetof(FieldValue, fieldId) == 12);
static_assert(offsetof(FieldValue, fieldType) == 14);
static_assert(offsetof(FieldValue, status) == 16);
static_assert(offsetof(FieldValue, ts) == 24);
static_assert(offsetof(FieldValue, value) == 32);
static_assert(sizeof(FieldValue) == 32 + kMaxBlobLength);
static_assert(kFieldValueVersion == 0x02001020u);
static_assert(kConnectParamsVersion == 0x02000010u);
static_assert(sizeof(MigEntityInfo) == 148 && offsetof(MigEntityInfo, nvmlInstanceId) == 132);
static_assert(offsetof(MigHierarchyEntry, parent) == 8 && offsetof(MigHierarchyEntry, info) == 16);
static_assert(sizeof(MigHierarchyEntry) == 164);
static_assert(offsetof(MigHierarchy, entityList) == 8 && sizeof(MigHierarchy) == 8 + 448 * 164);
static_assert(kMigHierarchyVersion == 0x02011f08u);

// Function types of the entry points kgpu calls: X(name, return type, parameter list).
#define KGPU_DCGM_FUNCTIONS(X)                                                                                      \
  X(dcgmInit, Return, ())                                                                                           \
  X(dcgmShutdown, Return, ())                                                                                       \
  X(dcgmStartEmbedded, Return, (int mode, Handle* handle))                                                          \
  X(dcgmStopEmbedded, Return, (Handle handle))                                                                      \
  X(dcgmConnect_v2, Return, (const char* address, ConnectParams* params, Handle* handle))                           \
  X(dcgmDisconnect, Return, (Handle handle))                                                                        \
  X(dcgmGetAllSupportedDevices, Return, (Handle handle, unsigned* gpu_ids, int* count))                             \
  X(dcgmGroupCreate, Return, (Handle handle, int type, const char* name, GroupId* group))                           \
  X(dcgmGroupDestroy, Return, (Handle handle, GroupId group))                                                       \
  X(dcgmGroupAddEntity, Return, (Handle handle, GroupId group, int entity_group, unsigned entity_id))               \
  X(dcgmFieldGroupCreate, Return,                                                                                   \
    (Handle handle, int count, const unsigned short* field_ids, const char* name, FieldGroupId* field_group))       \
  X(dcgmFieldGroupDestroy, Return, (Handle handle, FieldGroupId field_group))                                       \
  X(dcgmWatchFields, Return,                                                                                        \
    (Handle handle, GroupId group, FieldGroupId field_group, long long update_us, double keep_s, int keep_samples)) \
  X(dcgmUnwatchFields, Return, (Handle handle, GroupId group, FieldGroupId field_group))                            \
  X(dcgmUpdateAllFields, Return, (Handle handle, int wait))                                                         \
  X(dcgmEntitiesGetLatestValues, Return,                                                                            \
    (Handle handle, EntityPair * entities, unsigned entity_count, unsigned short* field_ids, unsigned field_count,  \
     unsigned flags, FieldValue* values))                                                                           \
  X(dcgmGetGpuInstanceHierarchy, Return, (Handle handle, MigHierarchy * hierarchy))

namespace fn {
#define KGPU_DCGM_DECLARE_TYPE(name, ret, params) using name = ret(*) params;
KGPU_DCGM_FUNCTIONS(KGPU_DCGM_DECLARE_TYPE)
#undef KGPU_DCGM_DECLARE_TYPE
using errorString = const char* (*)(Return);
}  // namespace fn

}  // namespace kgpu::dcgm
