#include "agent/cluster_view.h"

#include "common/log.h"
#include "k8s/api/json.h"
#include "apiclient/client.h"
#include "apiclient/informer.h"

namespace kgpu::agent {

namespace {

class KubeClusterView final : public ClusterView {
 public:
  KubeClusterView(std::unique_ptr<kube::Client> client, std::string node_name, bool watch_node)
      : client_(std::move(client)), node_(std::move(node_name)), selector_("spec.nodeName=" + node_) {
    kube::InformerOptions o;
    o.resource = kube::resources::kPods;
    o.field_selector = selector_;
    informer_ = std::make_unique<kube::Informer>(*client_, o);
    if (watch_node) {
      kube::InformerOptions n;
      n.resource = kube::resources::kNodes;
      n.field_selector = "metadata.name=" + node_;
      // Only the labels are read: the node's status (images, conditions) is not kept.
      n.transform = [](nlohmann::json& node) {
        nlohmann::json meta{{"name", node["metadata"].value("name", "")},
                            {"labels", node["metadata"].value("labels", nlohmann::json::object())}};
        node = {{"metadata", std::move(meta)}};
      };
      node_informer_ = std::make_unique<kube::Informer>(*client_, n);
    }
  }
  ~KubeClusterView() override {
    // A watch notices its stop within the client's 50 ms poll (kube::Client::watch).
    if (node_informer_) node_informer_->stop();
    informer_->stop();
  }

  void start(std::chrono::milliseconds sync_timeout) {
    informer_->start();
    if (node_informer_) node_informer_->start();
    if (!informer_->wait_for_sync(sync_timeout)) {
      log::warn("pod informer not synced yet: Allocate lists pods itself until it is",
                {log::kv("node", node_), log::kv("error", informer_->last_error())});
    }
    if (node_informer_ && !node_informer_->wait_for_sync(sync_timeout)) {
      log::warn("node informer not synced yet: the config is chosen without the node's label until it is",
                {log::kv("node", node_), log::kv("error", node_informer_->last_error())});
    }
  }

  std::optional<std::map<std::string, std::string>> node_labels() const override {
    if (!node_informer_ || !node_informer_->synced()) return std::nullopt;
    auto node = node_informer_->get(node_);
    if (!node) return std::nullopt;
    return k8s::api::string_map(k8s::api::at(*node, {"metadata", "labels"}));
  }

  const std::string& node_name() const override { return node_; }

  std::vector<nlohmann::json> cached_pods() const override {
    std::vector<nlohmann::json> out;
    for (const auto& p : informer_->list()) out.push_back(*p);
    return out;
  }

  Result<std::vector<nlohmann::json>> list_pods() override {
    kube::ListOptions o;
    o.field_selector = selector_;
    auto items = client_->list_all(kube::resources::kPods, "", o);
    if (!items) return std::unexpected(items.error().to_error().wrap("listing the pods on node " + node_));
    return std::move(*items);
  }

  Result<void> annotate_pod(const std::string& ns, const std::string& name, const std::string& key,
                            const std::string& value) override {
    auto r = client_->patch(kube::resources::kPods, ns, name, kube::PatchType::kMerge, patch(key, value));
    if (!r) return std::unexpected(r.error().to_error().wrap(fmt::format("annotating pod {}/{}", ns, name)));
    return {};
  }

  Result<void> annotate_node(const std::string& key, const std::string& value) override {
    auto r = client_->patch(kube::resources::kNodes, "", node_, kube::PatchType::kMerge, patch(key, value));
    if (!r) return std::unexpected(r.error().to_error().wrap("annotating node " + node_));
    return {};
  }

 private:
  static nlohmann::json patch(const std::string& key, const std::string& value) {
    return {{"metadata", {{"annotations", {{key, value}}}}}};
  }

  std::unique_ptr<kube::Client> client_;
  std::string node_, selector_;
  std::unique_ptr<kube::Informer> informer_;
  std::unique_ptr<kube::Informer> node_informer_;  // with watch_node
};

}  // namespace

std::unique_ptr<ClusterView> make_kube_cluster_view(std::unique_ptr<kube::Client> client, std::string node_name,
                                                    std::chrono::milliseconds sync_timeout, bool watch_node) {
  auto view = std::make_unique<KubeClusterView>(std::move(client), std::move(node_name), watch_node);
  view->start(sync_timeout);
  return view;
}

}  // namespace kgpu::agent
