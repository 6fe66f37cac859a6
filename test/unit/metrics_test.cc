#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "metrics/attribution.h"
#include "metrics/counters.h"
#include "metrics/exposition.h"
#include "metrics/frame.h"
#include "metrics/sampler.h"
#include "../integration/paths.h"

namespace kgpu::metrics {
namespace {

TEST(Counters, TheTwentySixDefaultsInOrder) {
  auto c = default_counters();
  ASSERT_EQ(c.size(), 26u);
  EXPECT_STREQ(c[0].field->name, "DCGM_FI_DEV_SM_CLOCK");
  EXPECT_STREQ(c[11].field->name, "DCGM_FI_DEV_XID_ERRORS");
  EXPECT_STREQ(c[20].field->name, "DCGM_FI_DRIVER_VERSION");
  EXPECT_EQ(c[20].type, MetricType::kLabel);
  EXPECT_STREQ(c[25].field->name, "DCGM_FI_PROF_PCIE_RX_BYTES");
  EXPECT_EQ(c[5].type, MetricType::kCounter);
  EXPECT_EQ(c[5].help, "Total energy consumption since boot (in mJ).");
}

TEST(Counters, ParsesDcgmExporterCsv) {
  auto set = parse_counters(
      "# Format\n"
      "# If line starts with a '#' it is considered a comment\n"
      "DCGM_FI_DEV_GPU_UTIL,      gauge, GPU utilization (in %).\n"
      "\n"
      "  DCGM_FI_DEV_DEC_UTIL ,     gauge, Decoder utilization (in %).\n"
      "DCGM_FI_PROF_PIPE_INT_ACTIVE, gauge, Ratio of cycles the integer pipe is active.\n"
      "DCGM_FI_DRIVER_VERSION,        label, Driver Version\n",
      "counters.csv");
  ASSERT_TRUE(set) << set.error().message;
  ASSERT_EQ(set->counters.size(), 3u);
  EXPECT_STREQ(set->counters[1].field->name, "DCGM_FI_DEV_DEC_UTIL");
  EXPECT_EQ(set->counters[1].help, "Decoder utilization (in %).");
  ASSERT_EQ(set->warnings.size(), 1u);
  EXPECT_EQ(set->warnings[0], "counters.csv:6: DCGM_FI_PROF_PIPE_INT_ACTIVE is not available from NVML; skipped");
}

TEST(Counters, DuplicateFieldKeepsTheFirst) {
  auto set = parse_counters("DCGM_FI_DEV_GPU_TEMP, gauge, a\nDCGM_FI_DEV_GPU_TEMP, gauge, b\n", "c.csv");
  ASSERT_TRUE(set);
  ASSERT_EQ(set->counters.size(), 1u);
  EXPECT_EQ(set->counters[0].help, "a");
  ASSERT_EQ(set->warnings.size(), 1u);
  EXPECT_EQ(set->warnings[0], "c.csv:2: DCGM_FI_DEV_GPU_TEMP is listed twice; the first line wins");
}

TEST(Counters, MalformedLinesNameTheLine) {
  auto bad_type = parse_counters("DCGM_FI_DEV_GPU_UTIL, histogram, x\n", "c.csv");
  ASSERT_FALSE(bad_type);
  EXPECT_EQ(bad_type.error().message,
            "c.csv:1: DCGM_FI_DEV_GPU_UTIL: unknown type 'histogram' (gauge, counter or label)");
  auto short_line = parse_counters("# c\nDCGM_FI_DEV_GPU_UTIL gauge\n", "c.csv");
  ASSERT_FALSE(short_line);
  EXPECT_NE(short_line.error().message.find("c.csv:2: expected 'FIELD, type, help'"), std::string::npos);
  auto not_dcgm = parse_counters("gpu_util, gauge, x\n", "c.csv");
  ASSERT_FALSE(not_dcgm);
  auto label_mismatch = parse_counters("DCGM_FI_DEV_GPU_UTIL, label, x\n", "c.csv");
  ASSERT_FALSE(label_mismatch);
}

TEST(Counters, ValueFormats) {
  EXPECT_EQ(format_value(Value::integer(1980)), "1980");
  EXPECT_EQ(format_value(Value::real(112.67)), "112.670000");
  EXPECT_EQ(format_value(Value::real(0.5)), "0.500000");
}

Frame one_gpu_frame() {
  Frame f;
  f.hostname = "node-a";
  f.driver_version = "580.105.08";
  DeviceSample d;
  d.id = {6, "GPU-d0f25a6f", "00000000:B9:00.0", "NVIDIA H100 80GB HBM3", std::nullopt, std::nullopt};
  d.telemetry.gpu_index = 6;
  d.telemetry.power_w = 112.67;
  d.telemetry.gpu_util_pct = 0;
  d.owner = PodRef{"nim-workload", "llama-3-2-1b-7577f87fc7-dhb97", "llama-3-2-1b-ctr"};
  f.devices.push_back(d);
  f.gpu_identity[6] = d.id;
  f.gpu_up[6] = true;
  return f;
}

TEST(Render, DcgmExporterLineFormat) {
  const auto text = render(default_counters(), one_gpu_frame());
  EXPECT_NE(text.find("# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).\n# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n"
                      "DCGM_FI_DEV_POWER_USAGE{gpu=\"6\",UUID=\"GPU-d0f25a6f\",pci_bus_id=\"00000000:B9:00.0\","
                      "device=\"nvidia6\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"node-a\","
                      "DCGM_FI_DRIVER_VERSION=\"580.105.08\",container=\"llama-3-2-1b-ctr\",namespace=\"nim-workload\","
                      "pod=\"llama-3-2-1b-7577f87fc7-dhb97\"} 112.670000\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("DCGM_FI_DEV_GPU_UTIL{gpu=\"6\""), std::string::npos);  // a real 0 is exported
  EXPECT_NE(text.find("} 0\n"), std::string::npos);
  // Not provided -> no series and no family.
  EXPECT_EQ(text.find("DCGM_FI_DEV_GPU_TEMP"), std::string::npos);
  EXPECT_EQ(text.find("DCGM_FI_DEV_VGPU_LICENSE_STATUS"), std::string::npos);
  // XID gauge: 0 until an XID arrives.
  EXPECT_NE(text.find("DCGM_FI_DEV_XID_ERRORS{gpu=\"6\""), std::string::npos);
  EXPECT_NE(text.find("kgpu_gpu_up{gpu=\"6\""), std::string::npos);
}

TEST(Render, WithoutDriverLabelAndWithMig) {
  auto counters = parse_counters("DCGM_FI_DEV_FB_USED, gauge, Framebuffer memory used (in MiB).\n", "c");
  ASSERT_TRUE(counters);
  Frame f = one_gpu_frame();
  f.devices[0].telemetry.fb_used_mib = 100;
  DeviceSample m;
  m.id = {6, "GPU-d0f25a6f", "00000000:B9:00.0", "NVIDIA H100 80GB HBM3", std::string("3g.40gb"), 2u};
  m.telemetry.gpu_index = 6;
  m.telemetry.gpu_instance_id = 2;
  m.telemetry.fb_used_mib = 7;
  f.devices.push_back(m);
  const auto text = render(counters->counters, f);
  EXPECT_NE(text.find("DCGM_FI_DEV_FB_USED{gpu=\"6\",UUID=\"GPU-d0f25a6f\",pci_bus_id=\"00000000:B9:00.0\","
                      "device=\"nvidia6\",modelName=\"NVIDIA H100 80GB HBM3\",GPU_I_PROFILE=\"3g.40gb\",GPU_I_ID=\"2\","
                      "Hostname=\"node-a\"} 7\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("DCGM_FI_DRIVER_VERSION"), std::string::npos);
  EXPECT_EQ(text.find("DCGM_FI_DEV_POWER_USAGE"), std::string::npos);
}

TEST(Render, SharedGpuContainersAllocationsAndXids) {
  Frame f = one_gpu_frame();
  f.devices[0].owner.reset();
  f.devices[0].telemetry.fb_used_mib = 3000;
  const DeviceIdentity id = f.devices[0].id;
  f.containers.push_back({PodRef{"team-a", "nb-1", "jupyter"}, id, 37.0, 1024, 2});
  f.containers.push_back({PodRef{"team-b", "svc-1", "server"}, id, std::nullopt, 2048, 1});
  f.allocations.push_back({PodRef{"team-a", "nb-1", "jupyter"}, id, "nvidia.com/gpu", "GPU-d0f25a6f::1"});
  f.xid_counts[{6, 79}] = 2;
  const auto text = render(default_counters(), f);
  EXPECT_NE(text.find(",container=\"jupyter\",namespace=\"team-a\",pod=\"nb-1\"} 37\n"), std::string::npos) << text;
  EXPECT_NE(text.find(",container=\"server\",namespace=\"team-b\",pod=\"svc-1\"} 2048\n"), std::string::npos);
  EXPECT_NE(text.find("kgpu_device_allocated{gpu=\"6\""), std::string::npos);
  EXPECT_NE(text.find("resource=\"nvidia.com/gpu\",device_id=\"GPU-d0f25a6f::1\",container=\"jupyter\""),
            std::string::npos);
  EXPECT_NE(text.find("kgpu_container_gpu_processes{"), std::string::npos);
  EXPECT_NE(text.find(",xid=\"79\"} 2\n"), std::string::npos);
}

std::string data_file(const std::string& name) {
  std::ifstream in(std::string(KGPU_SOURCE_DIR + "/test/data/counters/") + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> names(const CounterSet& set) {
  std::vector<std::string> out;
  for (const auto& c : set.counters) out.push_back(c.name);
  return out;
}

TEST(Counters, DcgmExporterDefaultAndDcpFilesGiveTheTwentySix) {
  std::vector<std::string> defaults;
  for (const auto& c : default_counters()) defaults.push_back(c.name);
  for (const char* file : {"default-counters.csv", "dcp-metrics-included.csv"}) {
    const std::string text = data_file(file);
    ASSERT_FALSE(text.empty()) << file;
    auto set = parse_counters(text, file);
    ASSERT_TRUE(set) << set.error().message;
    EXPECT_EQ(names(*set), defaults) << file;
    EXPECT_TRUE(set->warnings.empty()) << file << ": " << set->warnings[0];
  }
}

TEST(Counters, DcgmExporterLegacyNamesAreServedUnderTheirNames) {
  auto set = parse_counters(data_file("1.x-compatibility-metrics.csv"), "1x.csv");
  ASSERT_TRUE(set) << set.error().message;
  const std::vector<std::string> expected = {"dcgm_sm_clock",
                                             "dcgm_memory_clock",
                                             "dcgm_memory_temp",
                                             "dcgm_gpu_temp",
                                             "dcgm_power_usage",
                                             "dcgm_total_energy_consumption",
                                             "dcgm_fi_prof_pcie_tx_bytes",
                                             "dcgm_fi_prof_pcie_rx_bytes",
                                             "dcgm_pcie_replay_counter",
                                             "dcgm_gpu_utilization",
                                             "dcgm_mem_copy_utilization",
                                             "dcgm_enc_utilization",
                                             "dcgm_dec_utilization",
                                             "dcgm_xid_errors",
                                             "dcgm_fb_free",
                                             "dcgm_fb_used",
                                             "dcgm_nvlink_bandwidth_total",
                                             "dcgm_fi_prof_gr_engine_active",
                                             "dcgm_fi_prof_pipe_tensor_active",
                                             "dcgm_fi_prof_dram_active"};
  EXPECT_EQ(names(*set), expected);
  EXPECT_STREQ(set->counters[3].field->name, "DCGM_FI_DEV_GPU_TEMP");
  EXPECT_EQ(set->counters[6].type, MetricType::kCounter);  // as the file types it
  EXPECT_EQ(set->counters[6].help, "Total number of bytes transmitted through PCIe TX via NVML.");
  // The file lists the two PCIe fields twice: the first line wins, the second is said.
  ASSERT_EQ(set->warnings.size(), 2u);
  EXPECT_EQ(set->warnings[0], "1x.csv:43: dcgm_fi_prof_pcie_tx_bytes is listed twice; the first line wins");

  auto missing = parse_counters("dcgm_power_violation, counter, x\ndcgm_fb_used, gauge, y\n", "c.csv");
  ASSERT_TRUE(missing);
  ASSERT_EQ(missing->warnings.size(), 1u);
  EXPECT_EQ(missing->warnings[0],
            "c.csv:1: dcgm_power_violation (DCGM_FI_DEV_POWER_VIOLATION) is not available from NVML; skipped");
  auto unknown = parse_counters("dcgm_gpu_tmp, gauge, x\n", "c.csv");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().message,
            "c.csv:1: 'dcgm_gpu_tmp' is not a DCGM field name (DCGM_FI_*, DCGM_EXP_* or a dcgm-exporter 1.x name)");
}

TEST(Counters, ExporterFieldsAreCountedOrSaidToBeMissing) {
  auto set = parse_counters(data_file("exporter-fields.csv"), "exp.csv");
  ASSERT_TRUE(set) << set.error().message;
  ASSERT_EQ(set->counters.size(), 28u);
  const auto& clocks = set->counters[12];
  EXPECT_EQ(clocks.name, "DCGM_EXP_CLOCK_EVENTS_COUNT");
  EXPECT_EQ(clocks.exporter, ExporterField::kClockEventsCount);
  EXPECT_EQ(clocks.field, nullptr);
  EXPECT_EQ(set->counters[13].exporter, ExporterField::kXidErrorsCount);
  EXPECT_EQ(set->counters[13].help, "reported XIDs during last window");
  ASSERT_EQ(set->warnings.size(), 2u);
  EXPECT_NE(set->warnings[0].find("DCGM_EXP_GPU_HEALTH_STATUS is not available: "), std::string::npos);
  EXPECT_NE(set->warnings[1].find("DCGM_EXP_P2P_STATUS is not available: "), std::string::npos);
  auto typo = parse_counters("DCGM_EXP_XID_ERROR_COUNT, counter, x\n", "c.csv");
  ASSERT_FALSE(typo);
  EXPECT_NE(typo.error().message.find("c.csv:1: 'DCGM_EXP_XID_ERROR_COUNT' is not one of dcgm-exporter's fields"),
            std::string::npos);
  EXPECT_FALSE(parse_counters("DCGM_EXP_XID_ERRORS_COUNT, label, x\n", "c.csv"));
}

TEST(Render, XidErrorsCarryErrCodeAndErrMsg) {
  Frame f = one_gpu_frame();
  f.devices[0].history.last_xid = 79;
  auto text = render(default_counters(), f);
  EXPECT_NE(text.find("DCGM_FI_DEV_XID_ERRORS{gpu=\"6\",UUID=\"GPU-d0f25a6f\",pci_bus_id=\"00000000:B9:00.0\","
                      "device=\"nvidia6\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"node-a\","
                      "DCGM_FI_DRIVER_VERSION=\"580.105.08\",container=\"llama-3-2-1b-ctr\",err_code=\"79\","
                      "err_msg=\"GPU has fallen off the bus\",namespace=\"nim-workload\","
                      "pod=\"llama-3-2-1b-7577f87fc7-dhb97\"} 79\n"),
            std::string::npos)
      << text;
  f.devices[0].history.last_xid.reset();
  f.devices[0].owner.reset();
  text = render(default_counters(), f);
  EXPECT_NE(text.find("DCGM_FI_DRIVER_VERSION=\"580.105.08\",err_code=\"0\",err_msg=\"No Error\"} 0\n"),
            std::string::npos)
      << text;
  EXPECT_STREQ(xid_message(0), "No Error");
  EXPECT_STREQ(xid_message(13), "Graphics Engine Exception");
  EXPECT_STREQ(xid_message(48), "Double Bit ECC Error");
  EXPECT_STREQ(xid_message(94), "Contained ECC error");
  EXPECT_STREQ(xid_message(172), "Uncorrectable SRAM Error");
  EXPECT_STREQ(xid_message(173), "Unknown Error");
  EXPECT_STREQ(xid_message(-1), "Unknown Error");
}

TEST(Render, WindowedXidAndClockEventCounts) {
  auto set = parse_counters(
      "DCGM_EXP_XID_ERRORS_COUNT, counter, reported XIDs during last window\n"
      "DCGM_EXP_CLOCK_EVENTS_COUNT, counter, reported clock events\n",
      "c");
  ASSERT_TRUE(set);
  Frame f = one_gpu_frame();
  f.devices[0].owner.reset();
  DeviceSample other = f.devices[0];
  other.id.gpu = 7;
  other.id.uuid = "GPU-77";
  f.devices.push_back(other);
  f.xid_window[6] = {{79, 2}, {13, 1}};
  f.clock_event_window[6] = {{0x1, 5}, {0x40, 2}, {0x1000, 9}};  // 0x1000: a bit dcgm-exporter does not name
  f.xid_window_ms = 60000;
  const auto text = render(set->counters, f);
  const std::string id6 =
      "{gpu=\"6\",UUID=\"GPU-d0f25a6f\",pci_bus_id=\"00000000:B9:00.0\",device=\"nvidia6\","
      "modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"node-a\"";
  EXPECT_NE(text.find("# TYPE DCGM_EXP_XID_ERRORS_COUNT counter\n"
                      "DCGM_EXP_XID_ERRORS_COUNT" +
                      id6 +
                      ",window_size_in_ms=\"60000\",xid=\"13\"} 1\n"
                      "DCGM_EXP_XID_ERRORS_COUNT" +
                      id6 +
                      ",window_size_in_ms=\"60000\",xid=\"79\"} 2\n"
                      "DCGM_EXP_XID_ERRORS_COUNT{gpu=\"7\""),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("UUID=\"GPU-77\",pci_bus_id=\"00000000:B9:00.0\",device=\"nvidia7\","
                      "modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"node-a\",window_size_in_ms=\"60000\"} 0\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("DCGM_EXP_CLOCK_EVENTS_COUNT" + id6 +
                      ",clock_event=\"gpu_idle\",window_size_in_ms=\"300000\"} 5\n"
                      "DCGM_EXP_CLOCK_EVENTS_COUNT" +
                      id6 + ",clock_event=\"hw_thermal\",window_size_in_ms=\"300000\"} 2\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("} 9\n"), std::string::npos) << text;
}

TEST(Render, MigEnabledGpuIsShownThroughItsInstances) {
  Frame f = one_gpu_frame();
  f.devices[0].owner.reset();
  f.devices[0].mig_parent = true;
  f.devices[0].telemetry.gpu_temp_c = 41;
  DeviceSample m = f.devices[0];
  m.mig_parent = false;
  m.id.gi_profile = "1g.10gb";
  m.id.gi_id = 9;
  m.telemetry.gpu_instance_id = 9;
  m.owner = PodRef{"team-d", "infer-d", "model"};
  f.devices.push_back(m);
  const auto text = render(default_counters(), f);
  EXPECT_NE(text.find("DCGM_FI_DEV_GPU_TEMP{gpu=\"6\",UUID=\"GPU-d0f25a6f\",pci_bus_id=\"00000000:B9:00.0\","
                      "device=\"nvidia6\",modelName=\"NVIDIA H100 80GB HBM3\",GPU_I_PROFILE=\"1g.10gb\",GPU_I_ID=\"9\","
                      "Hostname=\"node-a\",DCGM_FI_DRIVER_VERSION=\"580.105.08\",container=\"model\","
                      "namespace=\"team-d\",pod=\"infer-d\"} 41\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("DCGM_FI_DEV_GPU_TEMP{gpu=\"6\",UUID=\"GPU-d0f25a6f\",pci_bus_id=\"00000000:B9:00.0\","
                      "device=\"nvidia6\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname="),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("kgpu_gpu_up{gpu=\"6\""), std::string::npos);  // kgpu's own families keep the GPU
  f.mig_parent_series = true;
  EXPECT_NE(render(default_counters(), f)
                .find("DCGM_FI_DEV_GPU_TEMP{gpu=\"6\",UUID=\"GPU-d0f25a6f\",pci_bus_id=\"00000000:B9:00.0\","
                      "device=\"nvidia6\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname="),
            std::string::npos);
}

TEST(Render, PodUidPodLabelsAndOldNamespace) {
  Frame f = one_gpu_frame();
  const PodRef& p = *f.devices[0].owner;
  f.pod_meta[{p.ns, p.pod}] = PodMeta{"0f0e-uid", {{"app", "llama"}, {"Zone", "a"}, {"pod", "clash"}}};
  auto set = parse_counters("DCGM_FI_DEV_POWER_USAGE, gauge, p\nDCGM_FI_DRIVER_VERSION, label, d\n", "c");
  ASSERT_TRUE(set);
  auto text = render(set->counters, f);
  EXPECT_NE(text.find("Hostname=\"node-a\",DCGM_FI_DRIVER_VERSION=\"580.105.08\",Zone=\"a\",app=\"llama\","
                      "container=\"llama-3-2-1b-ctr\",namespace=\"nim-workload\","
                      "pod=\"llama-3-2-1b-7577f87fc7-dhb97\",pod_uid=\"0f0e-uid\"} 112.670000\n"),
            std::string::npos)
      << text;
  // Under the 1.x names a pod label "pod" no longer clashes with an attribute: it stays.
  f.style.old_namespace = true;
  f.style.hostname = false;
  text = render(set->counters, f);
  EXPECT_NE(text.find("DCGM_FI_DEV_POWER_USAGE{gpu=\"6\",uuid=\"GPU-d0f25a6f\",pci_bus_id=\"00000000:B9:00.0\","
                      "device=\"nvidia6\",modelName=\"NVIDIA H100 80GB HBM3\",DCGM_FI_DRIVER_VERSION=\"580.105.08\","
                      "Zone=\"a\",app=\"llama\",pod=\"clash\",container_name=\"llama-3-2-1b-ctr\",pod_name=\"llama-3-2-"
                      "1b-7577f87fc7-"
                      "dhb97\",pod_namespace=\"nim-workload\",pod_uid=\"0f0e-uid\"} 112.670000\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(sanitize_label_name("app.kubernetes.io/name"), "app_kubernetes_io_name");
  EXPECT_EQ(sanitize_label_name("1st"), "_1st");
  // A pod label named like an identity label would print that name twice: it is dropped.
  f.style = {};
  f.pod_meta[{p.ns, p.pod}].labels = {{"gpu", "x"}, {"Hostname", "y"}, {"app", "llama"}};
  text = render(set->counters, f);
  EXPECT_NE(text.find("DCGM_FI_DRIVER_VERSION=\"580.105.08\",app=\"llama\",container="), std::string::npos) << text;
  EXPECT_EQ(text.find("gpu=\"x\""), std::string::npos) << text;
  EXPECT_EQ(text.find("Hostname=\"y\""), std::string::npos) << text;
}

TEST(Render, HelpTextIsEscaped) {
  auto set = parse_counters("DCGM_FI_DEV_GPU_TEMP, gauge, back\\slash\n", "c");
  ASSERT_TRUE(set);
  Frame f = one_gpu_frame();
  f.devices[0].telemetry.gpu_temp_c = 40;
  EXPECT_NE(render(set->counters, f).find("# HELP DCGM_FI_DEV_GPU_TEMP back\\\\slash\n"), std::string::npos);
}

TEST(Exposition, EscapesLabelValuesBackslashQuoteAndNewline) {
  EXPECT_EQ(exposition::escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

TEST(Exposition, HelpEscapesBackslashAndNewlineButNotQuotes) {
  EXPECT_EQ(exposition::escape_help("say \"hi\"\\now\nplease"), "say \"hi\"\\\\now\\nplease");
}

TEST(Exposition, FamilyHeaderAndSamples) {
  std::string out;
  exposition::family(out, "kgpu_x_total", "counter", "Things.\nMore");
  exposition::sample(out, "kgpu_x_total", {{"resource", "nvidia.com/gpu"}, {"health", "a\"b"}}, 3);
  exposition::sample(out, "kgpu_y", 0);
  EXPECT_EQ(out,
            "# HELP kgpu_x_total Things.\\nMore\n"
            "# TYPE kgpu_x_total counter\n"
            "kgpu_x_total{resource=\"nvidia.com/gpu\",health=\"a\\\"b\"} 3\n"
            "kgpu_y 0\n");
}

TEST(Exposition, LabelAddsACommaAfterAnotherLabel) {
  std::string out = "m{";
  exposition::label(out, "a", "1");
  exposition::label(out, "b", "2");
  EXPECT_EQ(out, "m{a=\"1\",b=\"2\"");
}

TEST(Cgroup, SystemdContainerd) {
  auto r = parse_cgroup(
      "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1a2b3c4d_5e6f_7a8b_9c0d_112233445566.slice/"
      "cri-containerd-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->pod_uid, "1a2b3c4d-5e6f-7a8b-9c0d-112233445566");
  EXPECT_EQ(r->container_id, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
}

TEST(Cgroup, CgroupfsDockerAndCrio) {
  auto docker = parse_cgroup(
      "12:memory:/kubepods/besteffort/pod1a2b3c4d-5e6f-7a8b-9c0d-112233445566/"
      "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210\n"
      "1:name=systemd:/kubepods/besteffort/pod1a2b3c4d-5e6f-7a8b-9c0d-112233445566/"
      "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210\n");
  ASSERT_TRUE(docker);
  EXPECT_EQ(docker->pod_uid, "1a2b3c4d-5e6f-7a8b-9c0d-112233445566");
  EXPECT_EQ(docker->container_id, "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210");
  auto crio = parse_cgroup(
      "0::/kubepods.slice/kubepods-pod1a2b3c4d_5e6f_7a8b_9c0d_112233445566.slice/"
      "crio-aaaabbbbccccddddeeeeffff0000111122223333444455556666777788889999.scope\n");
  ASSERT_TRUE(crio);
  EXPECT_EQ(crio->container_id, "aaaabbbbccccddddeeeeffff0000111122223333444455556666777788889999");
  auto dockerd = parse_cgroup(
      "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1a2b3c4d_5e6f_7a8b_9c0d_112233445566.slice/"
      "docker-aaaabbbbccccddddeeeeffff0000111122223333444455556666777788889999.scope\n");
  ASSERT_TRUE(dockerd);
  EXPECT_EQ(dockerd->container_id, "aaaabbbbccccddddeeeeffff0000111122223333444455556666777788889999");
}

TEST(Cgroup, StaticPodHashUid) {
  auto r = parse_cgroup(
      "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0123456789abcdef0123456789abcdef.slice/"
      "cri-containerd-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->pod_uid, "0123456789abcdef0123456789abcdef");
}

TEST(Cgroup, NotAPod) {
  EXPECT_FALSE(parse_cgroup("0::/system.slice/sshd.service\n"));
  EXPECT_FALSE(parse_cgroup("0::/user.slice/user-1000.slice/session-2.scope\n"));
  EXPECT_FALSE(parse_cgroup(""));
}

}  // namespace
}  // namespace kgpu::metrics
