#include <gtest/gtest.h>

#include "metrics/attribution.h"
#include "metrics/counters.h"
#include "metrics/exposition.h"
#include "metrics/frame.h"

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
