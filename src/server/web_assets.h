// The web page of `kvlab serve` (the files of web/), compiled into the binary
// by cmake/embed_web.cmake: an installed or copied kvlab then serves the page
// that matches its own API, with no search for files next to the binary and
// no way for a stale or missing web/ directory to break it. Editing a file of
// web/ only needs `ninja` (the generated source depends on them).
#pragma once
#include <span>
#include <string_view>

namespace kvlab::server {

struct WebAsset {
  std::string_view name;          // file name in web/, e.g. "app.js"
  std::string_view content_type;  // from the extension
  std::string_view body;
};

std::span<const WebAsset> web_assets();

}  // namespace kvlab::server
