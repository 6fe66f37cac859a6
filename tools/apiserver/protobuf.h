// Request bodies in Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`), which
// kubectl sends for `create namespace`, `create configmap` and `create secret`: the "k8s\0" magic,
// a runtime.Unknown envelope {typeMeta = 1, raw = 2, contentEncoding = 3, contentType = 4}, and the
// object in `raw`. Decoded to the JSON the rest of the server works on, for Namespace, ConfigMap
// and Secret with the ObjectMeta fields clients set (name, generateName, namespace, labels,
// annotations, finalizers). Other kinds are an error naming the kind (the server answers 415).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace kgpu::apiserver {

constexpr std::string_view kProtobufContentType = "application/vnd.kubernetes.protobuf";

// Decodes `body` as an object of `kind`. On failure returns null and sets `error`.
nlohmann::json decode_protobuf(std::string_view body, const std::string& kind, std::string& error);

}  // namespace kgpu::apiserver
