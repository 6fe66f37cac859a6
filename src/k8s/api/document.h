// A Document (k8s/document.h) of one API object, built straight from its parsed JSON: the live
// commands hold objects as nlohmann::json (API client, informers, extender bodies) and read them
// through the same typed views (k8s/objects.h) and rules as manifests and snapshots, without
// printing the JSON and parsing it again.
//
// The tree is sized exactly before it is built (one allocation). Values carry line 1 (an API
// object has no source lines; Field<T> presence needs a line). Strings, numbers and booleans keep
// their JSON text; a float out of range reads as the text "1e999", which no quantity accepts.
// Errors (kInvalidArgument): not an object, nested deeper than 256 levels, a `kind` that is not
// a string. Thread safety: pure function; the Document is immutable.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "common/error.h"
#include "k8s/document.h"

namespace kgpu::k8s::api {

// `kind` / `api_version`: what the Document says when the object has none (kube-scheduler's
// objects come from typed informers, which drop them). `source` names the object in messages.
Result<Document> document_from_json(const nlohmann::json& obj, std::string source, std::string_view kind = {},
                                    std::string_view api_version = "v1");

}  // namespace kgpu::k8s::api
