// JSON text kvlab reads from files (hardware profiles, model configs,
// validation tables), parsed with every failure as one kvlab::Error.
#pragma once
#include <nlohmann/json.hpp>
#include <string_view>

namespace kvlab {

// Throws kvlab::Error "ORIGIN: not valid JSON (...)" for bad syntax and for a
// number outside double's range (nlohmann reports that one as out_of_range,
// not parse_error).
nlohmann::json parse_json(std::string_view text, std::string_view origin);

}  // namespace kvlab
