// Request bodies in Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`), which
// kubectl sends for `create namespace`, `create configmap` and `create secret`, and Helm for its
// release Secrets (create, update, and the DeleteOptions of their DELETEs): the "k8s\0" magic, a
// runtime.Unknown envelope {typeMeta = 1 {apiVersion = 1, kind = 2}, raw = 2, contentEncoding = 3,
// contentType = 4}, and the message in `raw`. Decoded to the JSON the rest of the server works on:
// Namespace, ConfigMap and Secret with the ObjectMeta fields clients set (name, generateName,
// namespace, uid and resourceVersion as an update's preconditions, labels, annotations,
// finalizers), and meta/v1 DeleteOptions. Other kinds, an envelope naming another kind than the
// one expected, and malformed input are errors naming the problem (the server answers 415). Every
// read is bounds-checked; the messages decoded have a fixed shape, so nesting is bounded by it.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace kgpu::apiserver {

constexpr std::string_view kProtobufContentType = "application/vnd.kubernetes.protobuf";

// Decodes `body` as an object of `kind`. On failure returns null and sets `error`.
nlohmann::json decode_protobuf(std::string_view body, const std::string& kind, std::string& error);

// Decodes `body` as a meta/v1 DeleteOptions {gracePeriodSeconds = 1, preconditions = 2 {uid = 1,
// resourceVersion = 2}, orphanDependents = 3, propagationPolicy = 4, dryRun = 5 (repeated)} into
// its JSON form (fields absent from the message are absent). On failure returns null and sets
// `error`.
nlohmann::json decode_delete_options(std::string_view body, std::string& error);

}  // namespace kgpu::apiserver
