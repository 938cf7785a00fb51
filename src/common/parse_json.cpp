#include "common/parse_json.h"

#include <string>

#include "common/error.h"

namespace kvlab {

nlohmann::json parse_json(std::string_view text, std::string_view origin) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string(origin) + ": not valid JSON (" + e.what() + ")");
  }
}

}  // namespace kvlab
