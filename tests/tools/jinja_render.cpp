// Renders one template for a list of contexts, for the comparison with
// Python's jinja2 (tests/tools/check_chat_templates.py).
//
// Usage: kvlab_jinja_render TEMPLATE.jinja CONTEXTS.json
// CONTEXTS.json holds an array of objects, each the variables of one
// render. Prints a JSON array with, per context, {"output": text} or
// {"error": message}. strftime_now sees 26 July 2024, 12:00, as the Python
// side does.
#include <fstream>
#include <iostream>
#include <sstream>

#include "common/error.h"
#include "jinja/template.h"

namespace {

std::string read_file(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw kvlab::Error(std::string("cannot open ") + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

kvlab::jinja::RenderOptions fixed_clock() {
  kvlab::jinja::RenderOptions options;
  std::tm t{};
  t.tm_year = 2024 - 1900;
  t.tm_mon = 6;
  t.tm_mday = 26;
  t.tm_hour = 12;
  t.tm_wday = 5;  // a Friday
  t.tm_yday = 207;
  options.now = t;
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: kvlab_jinja_render TEMPLATE.jinja CONTEXTS.json\n";
    return 2;
  }
  using kvlab::jinja::Json;
  try {
    const Json contexts = Json::parse(read_file(argv[2]));
    const std::string source = read_file(argv[1]);
    Json results = Json::array();
    for (const Json& context : contexts) {
      try {
        results.push_back({{"output", kvlab::jinja::Template(source).render(context, fixed_clock())}});
      } catch (const kvlab::Error& e) {
        results.push_back({{"error", e.what()}});
      }
    }
    std::cout << results.dump(-1, ' ', false, Json::error_handler_t::replace) << "\n";
  } catch (const std::exception& e) {
    std::cerr << "kvlab_jinja_render: " << e.what() << "\n";
    return 1;
  }
}
