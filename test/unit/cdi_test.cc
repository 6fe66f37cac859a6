// The CDI specs and the driver files in them: the set derived from a real driver install's file
// list (test/data/driver-root), hooks, the optional device classes (gds, mofed, gdrcopy, IMEX
// channels), the refusal of a device without a device node, and every spec checked against the
// CDI schema (test/data/cdi/schema.json) with python3-jsonschema.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "agent/plugin_manager.h"
#include "sharing/allocate.h"
#include "sharing/config.h"
#include "sharing/plan.h"
#include "sharing_config.h"
#include "../integration/paths.h"

namespace kgpu::sharing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsSupersetOf;
using ::testing::UnorderedElementsAreArray;
namespace fs = std::filesystem;

constexpr const char* kVersion = "560.35.03";

class TempTree {
 public:
  TempTree() {
    char tmpl[] = "/tmp/kgpu-cdi-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  ~TempTree() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  const std::string& path() const { return dir_; }

 private:
  std::string dir_;
};

// The listing's paths (comments and blank lines skipped).
std::vector<std::string> listing() {
  std::ifstream in(KGPU_SOURCE_DIR + "/test/data/driver-root/nvidia-560.35.03-frugalware.files");
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] == '/') out.push_back(line);
  }
  return out;
}

// Builds the listed install under `root`: in each directory the names of one library form a chain
// (shorter name -> next longer name), the longest being the file (the data file's header).
void build_root(const std::string& root) {
  std::map<std::string, std::map<std::string, std::vector<std::string>>> groups;  // dir -> "X.so" -> names
  for (const auto& p : listing()) {
    const fs::path path(p);
    const std::string dir = path.parent_path().string(), name = path.filename().string();
    fs::create_directories(root + dir);
    const auto so = name.find(".so");
    if (so == std::string::npos) {
      std::ofstream(root + p) << "x";
      continue;
    }
    groups[dir][name.substr(0, so + 3)].push_back(name);
  }
  for (auto& [dir, libs] : groups) {
    for (auto& [base, names] : libs) {
      std::sort(names.begin(), names.end(), [](const auto& a, const auto& b) { return a.size() < b.size(); });
      std::ofstream(root + dir + "/" + names.back()) << "x";
      for (size_t i = 0; i + 1 < names.size(); ++i) fs::create_symlink(names[i + 1], root + dir + "/" + names[i]);
    }
  }
}

ListDir real_list() {
  return [](const std::string& dir) { return agent::list_driver_dir(dir); };
}

std::vector<std::string> container_paths(const std::vector<MountEdit>& m) {
  std::vector<std::string> out;
  for (const auto& x : m) out.push_back(x.container_path);
  return out;
}

// Runs the schema check on `text`; returns the validator's exit status and output.
std::pair<int, std::string> validate(const std::string& text) {
  TempTree t;
  const std::string file = t.path() + "/spec.json", out = t.path() + "/out.txt";
  std::ofstream(file) << text;
  const std::string cmd =
      "/usr/bin/python3 " + KGPU_SOURCE_DIR + "/test/data/cdi/validate.py " + file + " > " + out + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream in(out);
  std::stringstream s;
  s << in.rdbuf();
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, s.str()};
}

// The 20 libraries of the listing named `*.so.560.35.03` in /usr/lib, written out by hand.
const std::vector<std::string> kVersionedLibs = {
    "libcuda",           "libEGL_nvidia",       "libGLESv1_CM_nvidia", "libGLESv2_nvidia",   "libGLX_nvidia",
    "libnvcuvid",        "libnvidia-cfg",       "libnvidia-eglcore",   "libnvidia-encode",   "libnvidia-fbc",
    "libnvidia-glcore",  "libnvidia-glsi",      "libnvidia-glvkspirv", "libnvidia-gpucomp",  "libnvidia-gtk2",
    "libnvidia-gtk3",    "libnvidia-ml",        "libnvidia-opencl",    "libnvidia-ptxjitcompiler",
    "libnvidia-tls"};

TEST(DriverFiles, RealDriverInstallGivesTheToolkitsSet) {
  TempTree t;
  build_root(t.path());
  const DriverFiles f = discover_driver_files(t.path(), kVersion, real_list());
  EXPECT_EQ(f.version, kVersion);

  std::vector<std::string> want;
  for (const auto& l : kVersionedLibs) want.push_back("/usr/lib/" + l + ".so." + kVersion);
  want.push_back("/usr/lib/libnvidia-egl-wayland.so.1.1.13");  // EGL platform library, its own version
  want.push_back("/usr/lib/vdpau/libvdpau_nvidia.so." + std::string(kVersion));
  want.push_back("/usr/lib/xorg/modules/drivers/nvidia_drv.so");
  want.push_back("/usr/lib/xorg/modules/nvidia/extensions/libglxserver_nvidia.so." + std::string(kVersion));
  want.push_back("/usr/bin/nvidia-smi");
  want.push_back("/usr/share/glvnd/egl_vendor.d/10_nvidia.json");
  want.push_back("/usr/share/egl/egl_external_platform.d/10_nvidia_wayland.json");
  want.push_back("/usr/share/vulkan/icd.d/nvidia_icd.json");
  EXPECT_THAT(container_paths(f.mounts), UnorderedElementsAreArray(want));
  for (const auto& m : f.mounts) {
    EXPECT_EQ(m.host_path, t.path() + m.container_path);
    EXPECT_TRUE(m.read_only) << m.container_path;
  }
  // What the 9 compute prefixes of before left out: video encode/decode and graphics.
  EXPECT_THAT(container_paths(f.mounts),
              IsSupersetOf({"/usr/lib/libnvidia-encode.so.560.35.03", "/usr/lib/libnvcuvid.so.560.35.03",
                            "/usr/lib/libGLX_nvidia.so.560.35.03", "/usr/lib/libEGL_nvidia.so.560.35.03",
                            "/usr/lib/libnvidia-glvkspirv.so.560.35.03"}));

  std::vector<std::string> links;
  for (const auto& [target, link] : f.links) links.push_back(link + " -> " + target);
  EXPECT_THAT(links, IsSupersetOf({
                         "/usr/lib/libcuda.so.1 -> libcuda.so.560.35.03",
                         "/usr/lib/libcuda.so -> libcuda.so.1",
                         "/usr/lib/libnvidia-ml.so.1 -> libnvidia-ml.so.560.35.03",
                         "/usr/lib/libnvidia-encode.so.1 -> libnvidia-encode.so.560.35.03",
                         "/usr/lib/libnvcuvid.so.1 -> libnvcuvid.so.560.35.03",
                         "/usr/lib/libnvidia-eglcore.so -> libnvidia-eglcore.so.560.35.03",
                         "/usr/lib/libGLX_indirect.so.0 -> libGLX_nvidia.so.560.35.03",
                         "/usr/lib/vdpau/libvdpau_nvidia.so.1.0 -> libvdpau_nvidia.so.560.35.03",
                         "/usr/lib/vdpau/libvdpau_nvidia.so.1 -> libvdpau_nvidia.so.1.0",
                         "/usr/lib/libnvidia-egl-wayland.so.1 -> libnvidia-egl-wayland.so.1.1.13",
                     }));
  // 31 links of the listing lead to those files (28 in /usr/lib, 3 in vdpau/), plus
  // libGLX_indirect.so.0 (the toolkit's own; its libcuda.so is one of the 31). libglxserver's
  // link is an X module's, not a library's.
  EXPECT_EQ(f.links.size(), 31u + 1u);
  EXPECT_EQ(f.link_mounts.size(), 31u) << "every host link, for runtimes without the hook tool";
  EXPECT_THAT(f.library_dirs, ElementsAre("/usr/lib", "/usr/lib/vdpau"));
  EXPECT_EQ(f.libcuda_dir, "/usr/lib");

  // Without a version from NVML, the one libcuda.so.1 points to.
  EXPECT_EQ(discover_driver_files(t.path(), "", real_list()), f);
  // A leftover library of another version is not mounted.
  std::ofstream(t.path() + "/usr/lib/libnvidia-encode.so.550.54.15") << "x";
  EXPECT_EQ(discover_driver_files(t.path(), kVersion, real_list()).mounts.size(), f.mounts.size());
}

TEST(DriverFiles, FirmwareSocketsAndToolsOfAnUbuntuLayout) {
  TempTree t;
  const std::string r = t.path();
  fs::create_directories(r + "/usr/lib/x86_64-linux-gnu");
  fs::create_directories(r + "/lib/firmware/nvidia/550.54.15");
  fs::create_directories(r + "/run/nvidia-persistenced");
  fs::create_directories(r + "/var/run/nvidia-persistenced");
  fs::create_directories(r + "/usr/bin");
  fs::create_directories(r + "/tmp/nvidia-mps");
  for (const char* f : {"/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15", "/usr/lib/x86_64-linux-gnu/libnvidia-nvvm70.so.4",
                        "/lib/firmware/nvidia/550.54.15/gsp_ga10x.bin", "/lib/firmware/nvidia/550.54.15/gsp_tu10x.bin",
                        "/run/nvidia-persistenced/socket", "/var/run/nvidia-persistenced/socket", "/usr/bin/nvidia-imex",
                        "/usr/bin/nvidia-cuda-mps-control", "/usr/bin/bash"}) {
    std::ofstream(r + f) << "x";
  }
  fs::create_symlink("libcuda.so.550.54.15", r + "/usr/lib/x86_64-linux-gnu/libcuda.so.1");
  const DriverFiles f = discover_driver_files(r, "", real_list());
  EXPECT_EQ(f.version, "550.54.15");
  EXPECT_THAT(container_paths(f.mounts),
              UnorderedElementsAreArray(std::vector<std::string>{
                  "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15", "/usr/lib/x86_64-linux-gnu/libnvidia-nvvm70.so.4",
                  "/usr/bin/nvidia-cuda-mps-control", "/usr/bin/nvidia-imex",
                  "/lib/firmware/nvidia/550.54.15/gsp_ga10x.bin", "/lib/firmware/nvidia/550.54.15/gsp_tu10x.bin",
                  "/run/nvidia-persistenced/socket", "/tmp/nvidia-mps"}));
  // libcuda.so is created although the host has no such link (the toolkit's rule).
  std::vector<std::string> links;
  for (const auto& [target, link] : f.links) links.push_back(link + " -> " + target);
  EXPECT_THAT(links, ElementsAre("/usr/lib/x86_64-linux-gnu/libcuda.so.1 -> libcuda.so.550.54.15",
                                 "/usr/lib/x86_64-linux-gnu/libcuda.so -> libcuda.so.1"));
  EXPECT_EQ(f.link_mounts.size(), 1u);
  // A host libGLX_indirect.so.0 of Mesa is recreated for NVIDIA's GLX by the hook, never mounted.
  std::ofstream(r + "/usr/lib/x86_64-linux-gnu/libGLX_nvidia.so.550.54.15") << "x";
  std::ofstream(r + "/usr/lib/x86_64-linux-gnu/libGLX_mesa.so.0.0.0") << "x";
  fs::create_symlink("libGLX_mesa.so.0.0.0", r + "/usr/lib/x86_64-linux-gnu/libGLX_indirect.so.0");
  const DriverFiles glx = discover_driver_files(r, "", real_list());
  std::vector<std::string> glx_links;
  for (const auto& [target, link] : glx.links) glx_links.push_back(link + " -> " + target);
  EXPECT_THAT(glx_links, ::testing::Contains("/usr/lib/x86_64-linux-gnu/libGLX_indirect.so.0 -> libGLX_nvidia.so.550.54.15"));
  EXPECT_THAT(container_paths(glx.link_mounts), ElementsAre("/usr/lib/x86_64-linux-gnu/libcuda.so.1"));
  // No driver at all: nothing, no version.
  TempTree empty;
  const DriverFiles none = discover_driver_files(empty.path(), "", real_list());
  EXPECT_TRUE(none.mounts.empty());
  EXPECT_TRUE(none.version.empty());
}

// Debian's nvidia-driver packages: the libraries in nvidia/current/, the soname links there too.
TEST(DriverFiles, DebianLayout) {
  TempTree t;
  const std::string r = t.path(), cur = "/usr/lib/x86_64-linux-gnu/nvidia/current";
  fs::create_directories(r + cur);
  for (const char* f : {"libcuda.so.535.216.03", "libnvidia-encode.so.535.216.03", "libnvcuvid.so.535.216.03"}) {
    std::ofstream(r + cur + "/" + f) << "x";
  }
  fs::create_symlink("libcuda.so.535.216.03", r + cur + "/libcuda.so.1");
  fs::create_symlink("nvidia/current/libcuda.so.1", r + "/usr/lib/x86_64-linux-gnu/libcuda.so.1");
  const DriverFiles f = discover_driver_files(r, "", real_list());
  EXPECT_EQ(f.version, "535.216.03");
  EXPECT_THAT(container_paths(f.mounts), UnorderedElementsAreArray(std::vector<std::string>{
                                             cur + "/libcuda.so.535.216.03", cur + "/libnvidia-encode.so.535.216.03",
                                             cur + "/libnvcuvid.so.535.216.03"}));
  EXPECT_THAT(f.library_dirs, ElementsAre(cur));
  EXPECT_EQ(f.libcuda_dir, cur);
}

gpu::Inventory two_gpus() {
  gpu::Inventory inv;
  inv.driver_version = kVersion;
  for (unsigned i = 0; i < 2; ++i) {
    gpu::GpuInfo g;
    g.index = i;
    g.uuid = fmt::format("GPU-0000000{}-1111-2222-3333-444444444444", i);
    g.name = "NVIDIA H100 80GB HBM3";
    g.minor_number = i;
    g.memory_total_mib = 81559;
    inv.gpus.push_back(g);
  }
  inv.topology.assign(2, std::vector<gpu::Link>(2, gpu::Link::kSystem));
  return inv;
}

using test_support::config;

// A host whose dev root `dev` has the nodes in `nodes`.
HostFacts host_with(const std::set<std::string>& nodes) {
  HostFacts h;
  h.exists = [nodes](const std::string& p) { return nodes.contains(p); };
  return h;
}

const CdiSpecFile* find_spec(const std::vector<CdiSpecFile>& specs, const std::string& name) {
  for (const auto& s : specs) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

TEST(CdiSpec, DriverFilesHooksAndSchema) {
  TempTree t;
  build_root(t.path());
  Overrides o;
  o.nvidia_driver_root = t.path();
  const Config c = config("", o);
  auto plan = make_plan(two_gpus(), c);
  ASSERT_TRUE(plan);
  HostFacts h = host_with({t.path() + "/dev/nvidia0", t.path() + "/dev/nvidia1", t.path() + "/dev/nvidiactl"});
  h.driver = discover_driver_files(t.path(), kVersion, real_list());
  h.hook_tool = "/usr/bin/nvidia-cdi-hook";
  auto specs = cdi_specs(*plan, c, h);
  ASSERT_TRUE(specs) << specs.error().message;
  ASSERT_EQ(specs->size(), 1u);
  EXPECT_EQ(specs->at(0).name, "k8s.device-plugin.nvidia.com-gpu.json");
  const auto spec = nlohmann::json::parse(specs->at(0).text);
  EXPECT_EQ(spec["cdiVersion"], "0.5.0");
  EXPECT_EQ(spec["kind"], "k8s.device-plugin.nvidia.com/gpu");
  ASSERT_EQ(spec["devices"].size(), 4u);
  EXPECT_EQ(spec["devices"][1]["name"], "0");
  EXPECT_EQ(spec["devices"][2]["containerEdits"]["deviceNodes"][0]["hostPath"], t.path() + "/dev/nvidia1");
  const auto& edits = spec["containerEdits"];
  EXPECT_THAT(edits["env"], ElementsAre("NVIDIA_VISIBLE_DEVICES=void", "NVIDIA_CTK_LIBCUDA_DIR=/usr/lib"));
  EXPECT_EQ(edits["deviceNodes"].size(), 1u);
  EXPECT_EQ(edits["mounts"].size(), h.driver.mounts.size());
  ASSERT_EQ(edits["hooks"].size(), 3u);
  EXPECT_EQ(edits["hooks"][0]["path"], "/usr/bin/nvidia-cdi-hook");
  EXPECT_EQ(edits["hooks"][0]["hookName"], "createContainer");
  EXPECT_EQ(edits["hooks"][0]["args"][0], "nvidia-cdi-hook");
  EXPECT_EQ(edits["hooks"][0]["args"][1], "create-symlinks");
  EXPECT_EQ(edits["hooks"][0]["args"].size(), 2 + 2 * h.driver.links.size());
  EXPECT_THAT(edits["hooks"][1]["args"], ElementsAre("nvidia-cdi-hook", "enable-cuda-compat",
                                                     "--host-driver-version=560.35.03"));
  EXPECT_THAT(edits["hooks"][2]["args"], ElementsAre("nvidia-cdi-hook", "update-ldcache", "--folder", "/usr/lib",
                                                     "--folder", "/usr/lib/vdpau"));
  auto [rc, out] = validate(specs->at(0).text);
  EXPECT_EQ(rc, 0) << out;

  // nvidia-ctk's form of the same hooks.
  h.hook_tool = "/usr/local/nvidia/toolkit/nvidia-ctk";
  auto ctk = nlohmann::json::parse(cdi_specs(*plan, c, h)->at(0).text);
  EXPECT_THAT(ctk["containerEdits"]["hooks"][1]["args"],
              ElementsAre("nvidia-ctk", "hook", "enable-cuda-compat", "--host-driver-version=560.35.03"));

  // No hook tool on the host: the host's links are mounted instead, no hooks.
  h.hook_tool.clear();
  auto plain = cdi_specs(*plan, c, h);
  const auto p = nlohmann::json::parse(plain->at(0).text);
  EXPECT_FALSE(p["containerEdits"].contains("hooks"));
  EXPECT_EQ(p["containerEdits"]["mounts"].size(), h.driver.mounts.size() + h.driver.link_mounts.size());
  auto [rc2, out2] = validate(plain->at(0).text);
  EXPECT_EQ(rc2, 0) << out2;
}

TEST(CdiSpec, ADeviceWithoutADeviceNodeIsRefused) {
  const Config c = config("");
  auto inv = two_gpus();
  auto plan = make_plan(inv, c);
  ASSERT_TRUE(plan);
  // /dev/nvidia1 is missing (the driver is still loading, or the dev root is wrong).
  auto specs = cdi_specs(*plan, c, host_with({"/dev/nvidia0", "/dev/nvidiactl"}));
  ASSERT_FALSE(specs);
  EXPECT_EQ(specs.error().code, ErrorCode::kNotFound);
  EXPECT_THAT(specs.error().message, HasSubstr("device GPU-00000001-1111-2222-3333-444444444444 (index 1) has no "
                                               "device node (/dev/nvidia1)"));
  // No minor number from NVML: refused too.
  inv.gpus[1].minor_number.reset();
  auto no_minor = make_plan(inv, c);
  ASSERT_TRUE(no_minor);
  auto again = cdi_specs(*no_minor, c, host_with({"/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl"}));
  ASSERT_FALSE(again);
  EXPECT_THAT(again.error().message, HasSubstr("no minor number"));

  // The spec such a device used to give is what CDI runtimes reject: the schema says so too.
  auto ok = cdi_specs(*plan, c, host_with({"/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl"}));
  ASSERT_TRUE(ok);
  auto spec = nlohmann::json::parse(ok->at(0).text);
  EXPECT_EQ(validate(spec.dump()).first, 0);
  spec["devices"][2]["containerEdits"]["deviceNodes"] = nlohmann::json::array();
  auto [rc, out] = validate(spec.dump());
  EXPECT_EQ(rc, 1);
  EXPECT_THAT(out, HasSubstr("devices/2/containerEdits"));
}

// A whole GPU's DRM nodes (graphics: X, Vulkan display) join its CDI device, as the toolkit's.
TEST(CdiSpec, DrmNodesOfWholeGpus) {
  Overrides o;
  o.nvidia_driver_root = "/host";
  const Config c = config("", o);
  const ListDir list = [](const std::string& dir) {
    if (dir == "/sys/bus/pci/devices/0000:18:00.0/drm") return std::vector<DirEntry>{{"card1", ""}, {"renderD128", ""}};
    if (dir == "/sys/bus/pci/devices/0000:2a:00.0/drm") return std::vector<DirEntry>{{"card2", ""}, {"controlD65", ""}};
    if (dir == "/host/dev/dri") return std::vector<DirEntry>{{"by-path", ""}, {"card1", ""}, {"renderD128", ""}, {"card2", ""}};
    if (dir == "/host/dev/dri/by-path") {
      return std::vector<DirEntry>{{"pci-0000:18:00.0-card", "../card1"},
                                   {"pci-0000:18:00.0-render", "../renderD128"},
                                   {"pci-0000:2a:00.0-card", "../card2"},
                                   {"platform-simple-framebuffer.0-card", "../card0"}};
    }
    return std::vector<DirEntry>{};
  };
  const auto n = discover_drm_nodes(c, "00000000:18:00.0", "/sys/bus/pci/devices", list);
  ASSERT_EQ(n.size(), 2u);
  EXPECT_EQ(n[0].container_path, "/dev/dri/card1");
  EXPECT_EQ(n[0].host_path, "/host/dev/dri/card1");
  EXPECT_EQ(n[1].container_path, "/dev/dri/renderD128");
  // Upper-case hex from NVML, a controlD node (not a device a container gets), no DRM at all.
  EXPECT_EQ(discover_drm_nodes(c, "00000000:2A:00.0", "/sys/bus/pci/devices", list).size(), 1u);
  EXPECT_TRUE(discover_drm_nodes(c, "00000000:3b:00.0", "/sys/bus/pci/devices", list).empty());
  EXPECT_TRUE(discover_drm_nodes(c, "garbage", "/sys/bus/pci/devices", list).empty());

  const auto links = discover_drm_links(c, "00000000:18:00.0", n, list);
  ASSERT_EQ(links.size(), 2u);
  EXPECT_EQ(links[0], (std::pair<std::string, std::string>{"../card1", "/dev/dri/by-path/pci-0000:18:00.0-card"}));
  EXPECT_EQ(links[1].second, "/dev/dri/by-path/pci-0000:18:00.0-render");
  // A link to a node the device does not get is left out.
  EXPECT_TRUE(discover_drm_links(c, "00000000:18:00.0", {n[1]}, list).size() == 1);

  auto plan = make_plan(two_gpus(), c);
  ASSERT_TRUE(plan);
  HostFacts h = host_with({"/host/dev/nvidia0", "/host/dev/nvidia1", "/host/dev/nvidiactl"});
  h.drm_nodes[1] = n;
  h.drm_links[1] = links;
  h.hook_tool = "/usr/bin/nvidia-cdi-hook";
  auto specs = cdi_specs(*plan, c, h);
  ASSERT_TRUE(specs);
  const auto spec = nlohmann::json::parse(specs->at(0).text);
  EXPECT_EQ(spec["devices"][0]["containerEdits"]["deviceNodes"].size(), 1u);
  EXPECT_FALSE(spec["devices"][0]["containerEdits"].contains("hooks"));
  EXPECT_EQ(spec["devices"][2]["containerEdits"]["deviceNodes"].size(), 3u);
  EXPECT_EQ(spec["devices"][2]["containerEdits"]["deviceNodes"][2]["path"], "/dev/dri/renderD128");
  EXPECT_THAT(spec["devices"][2]["containerEdits"]["hooks"][0]["args"],
              ElementsAre("nvidia-cdi-hook", "create-symlinks", "--link", "../card1::/dev/dri/by-path/pci-0000:18:00.0-card",
                          "--link", "../renderD128::/dev/dri/by-path/pci-0000:18:00.0-render"));
  auto [rc, out] = validate(specs->at(0).text);
  EXPECT_EQ(rc, 0) << out;
  // DRM nodes alone do not make a GPU whose /dev/nvidia<minor> is missing usable.
  HostFacts no_node = host_with({"/host/dev/nvidia0", "/host/dev/nvidiactl"});
  no_node.drm_nodes[1] = n;
  EXPECT_FALSE(cdi_specs(*plan, c, no_node));
}

TEST(CdiSpec, NoDevicesGivesNoGpuSpec) {
  gpu::Inventory none;
  const Config c = config("");
  auto plan = make_plan(none, c);
  ASSERT_TRUE(plan);
  auto specs = cdi_specs(*plan, c, host_with({}));
  ASSERT_TRUE(specs);
  EXPECT_TRUE(specs->empty()) << "a spec without devices is invalid (CDI: at least one device)";
}

ListDir fake_dev(std::map<std::string, std::vector<std::string>> dirs) {
  return [dirs](const std::string& dir) {
    std::vector<DirEntry> out;
    if (auto it = dirs.find(dir); it != dirs.end()) {
      for (const auto& n : it->second) out.push_back({n, ""});
    }
    return out;
  };
}

TEST(CdiSpec, GdsMofedGdrcopyAndImexChannels) {
  Overrides o;
  o.nvidia_driver_root = "/host";
  const Config c = config(R"(version: v1
flags:
  gdsEnabled: true
  mofedEnabled: true
  gdrcopyEnabled: true
imex:
  channelIDs: [0]
)", o);
  EXPECT_TRUE(c.gds_enabled && c.mofed_enabled && c.gdrcopy_enabled);
  EXPECT_THAT(c.imex_channel_ids, ElementsAre(0));
  const auto list = fake_dev({{"/host/dev", {"nvidia0", "nvidia1", "nvidiactl", "nvidia-fs0", "nvidia-fs1", "gdrdrv"}},
                              {"/host/dev/infiniband", {"uverbs0", "uverbs1", "rdma_cm", "umad0"}},
                              {"/host/dev/nvidia-caps-imex-channels", {"channel0"}},
                              {"/host/etc", {"cufile.json"}},
                              {"/host/run", {"udev"}}});
  HostFacts h = host_with({"/host/dev/nvidia0", "/host/dev/nvidia1", "/host/dev/nvidiactl"});
  h.extra = discover_extra_devices(c, "/host", list);
  ASSERT_EQ(h.extra.gds.size(), 2u);
  EXPECT_EQ(h.extra.gds[0].host_path, "/host/dev/nvidia-fs0");
  ASSERT_EQ(h.extra.mofed.size(), 3u) << "uverbs* and rdma_cm, not umad";
  ASSERT_EQ(h.extra.gdrcopy.size(), 1u);
  ASSERT_EQ(h.extra.imex_channels.size(), 1u);
  EXPECT_EQ(h.extra.imex_channels[0].second.container_path, "/dev/nvidia-caps-imex-channels/channel0");
  EXPECT_THAT(container_paths(h.extra.gds_mounts), ElementsAre("/run/udev", "/etc/cufile.json"));

  auto plan = make_plan(two_gpus(), c);
  ASSERT_TRUE(plan);
  auto specs = cdi_specs(*plan, c, h);
  ASSERT_TRUE(specs) << specs.error().message;
  ASSERT_EQ(specs->size(), 5u);
  for (const char* cls : {"gpu", "gds", "mofed", "gdrcopy", "imex-channel"}) {
    const auto* f = find_spec(*specs, fmt::format("k8s.device-plugin.nvidia.com-{}.json", cls));
    ASSERT_NE(f, nullptr) << cls;
    auto [rc, out] = validate(f->text);
    EXPECT_EQ(rc, 0) << cls << ": " << out;
  }
  const auto gds = nlohmann::json::parse(find_spec(*specs, "k8s.device-plugin.nvidia.com-gds.json")->text);
  EXPECT_EQ(gds["kind"], "k8s.device-plugin.nvidia.com/gds");
  EXPECT_EQ(gds["devices"][0]["name"], "all");
  EXPECT_EQ(gds["devices"][0]["containerEdits"]["deviceNodes"].size(), 2u);
  EXPECT_EQ(gds["devices"][0]["containerEdits"]["mounts"].size(), 2u);
  const auto imex = nlohmann::json::parse(find_spec(*specs, "k8s.device-plugin.nvidia.com-imex-channel.json")->text);
  EXPECT_EQ(imex["devices"][0]["name"], "0");
  EXPECT_EQ(imex["devices"][0]["containerEdits"]["deviceNodes"][0]["hostPath"],
            "/host/dev/nvidia-caps-imex-channels/channel0");

  // Allocate: NVIDIA's environment and the extra CDI devices after the GPUs.
  auto e = allocate(plan->resources[0], c, h, {{plan->resources[0].devices[1].id}}, "u");
  ASSERT_TRUE(e);
  const auto& a = e->at(0);
  EXPECT_THAT(a.cdi_devices,
              ElementsAre("k8s.device-plugin.nvidia.com/gpu=GPU-00000001-1111-2222-3333-444444444444",
                          "k8s.device-plugin.nvidia.com/gds=all", "k8s.device-plugin.nvidia.com/mofed=all",
                          "k8s.device-plugin.nvidia.com/gdrcopy=all", "k8s.device-plugin.nvidia.com/imex-channel=0"));
  EXPECT_EQ(a.envs.at("NVIDIA_GDS"), "enabled");
  EXPECT_EQ(a.envs.at("NVIDIA_MOFED"), "enabled");
  EXPECT_EQ(a.envs.at("NVIDIA_GDRCOPY"), "enabled");
  EXPECT_FALSE(a.envs.contains("NVIDIA_IMEX_CHANNELS")) << "CDI carries the channel";

  // envvar + passDeviceSpecs: the channel by variable and as a DeviceSpec; volume-mounts: a mount.
  Overrides env = o;
  env.device_list_strategy = "envvar,volume-mounts";
  env.pass_device_specs = "true";
  Config ce = c;
  ASSERT_TRUE(finalize(ce, env));
  auto ev = allocate(plan->resources[0], ce, h, {{plan->resources[0].devices[0].id}}, "u");
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->at(0).envs.at("NVIDIA_IMEX_CHANNELS"), "0");
  EXPECT_EQ(ev->at(0).envs.at("NVIDIA_GDS"), "enabled");
  EXPECT_TRUE(ev->at(0).cdi_devices.empty());
  std::vector<std::string> specs_paths;
  for (const auto& d : ev->at(0).devices) specs_paths.push_back(d.host_path);
  EXPECT_THAT(specs_paths, ElementsAre("/host/dev/nvidia0", "/host/dev/nvidiactl",
                                       "/host/dev/nvidia-caps-imex-channels/channel0"));
  EXPECT_EQ(ev->at(0).mounts.back().container_path, "/var/run/nvidia-container-devices/imex/0");

  // Enabled but absent on this node: no spec, no CDI name (a name that resolves to nothing fails
  // the container), the variables stay as NVIDIA sets them.
  HostFacts bare = host_with({"/host/dev/nvidia0", "/host/dev/nvidia1", "/host/dev/nvidiactl"});
  bare.extra = discover_extra_devices(c, "/host", fake_dev({}));
  EXPECT_THAT(bare.extra.imex_missing, ElementsAre(0));
  auto only_gpu = cdi_specs(*plan, c, bare);
  ASSERT_TRUE(only_gpu);
  EXPECT_EQ(only_gpu->size(), 1u);
  auto b = allocate(plan->resources[0], c, bare, {{plan->resources[0].devices[0].id}}, "u");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->at(0).cdi_devices.size(), 1u);
  EXPECT_EQ(b->at(0).envs.at("NVIDIA_GDS"), "enabled");
}

TEST(CdiConfig, FlagsVariablesAndImexRules) {
  Overrides o;
  o.gds_enabled = "true";
  o.imex_channel_ids = "0";
  o.imex_required = "true";
  const Config c = config("", o);
  EXPECT_TRUE(c.gds_enabled);
  EXPECT_FALSE(c.mofed_enabled);
  EXPECT_THAT(c.imex_channel_ids, ElementsAre(0));
  EXPECT_TRUE(c.imex_required);

  auto err = [](const std::string& yaml, const Overrides& ov = {}) {
    auto parsed_config = parse_config(yaml, "config.yaml");
    if (!parsed_config) return parsed_config.error().message;
    auto ok = finalize(*parsed_config, ov);
    return ok ? std::string() : ok.error().message;
  };
  EXPECT_EQ(err("imex:\n  channelIDs: [0, 1]\n"), "config.yaml: imex.channelIDs must be [] or [0]; found [0,1]");
  EXPECT_THAT(err("imex:\n  channelIDs: [x]\n"), HasSubstr("config.yaml:2: imex.channelIDs[0]: 'x' is not a channel ID"));
  EXPECT_THAT(err("imex:\n  channelIDs: 0\n"), HasSubstr("config.yaml:2: imex.channelIDs: expected a list"));
  EXPECT_THAT(err("imex:\n  required: maybe\n"), HasSubstr("config.yaml:2: imex.required"));
  EXPECT_THAT(err("flags:\n  gdrcopyEnabled: yes-please\n"), HasSubstr("config.yaml:2: flags.gdrcopyEnabled"));
  Overrides bad;
  bad.imex_channel_ids = "-1";
  EXPECT_THAT(err("", bad), HasSubstr("--imex-channel-ids"));
  EXPECT_EQ(err("imex:\n  channelIDs: []\n"), "");
  // gdsEnabled and mofedEnabled are no longer unknown-and-ignored.
  auto parsed = parse_config("flags:\n  gdsEnabled: true\n  mofedEnabled: false\n", "c.yaml");
  ASSERT_TRUE(parsed);
  EXPECT_TRUE(parsed->warnings.empty());
}

}  // namespace
}  // namespace kgpu::sharing
