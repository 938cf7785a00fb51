// kvlab quantize: re-encode a model's weights, so decode speed can be watched
// following bytes per weight while prefill speed does not.
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "common/error.h"
#include "gguf/convert.h"
#include "tensor/dtype.h"
#include "model/config.h"

namespace kvlab::cli {
namespace {

struct QuantizeOptions {
  std::string in, out, type;
};

void quantize(const QuantizeOptions& o) {
  const auto target = tensor::parse_dtype(o.type);
  if (!target) throw Error("unknown --type '" + o.type + "'");
  if (o.in == o.out) throw Error("output must differ from the input");
  const gguf::File in = gguf::File::open(o.in);
  model::load_config(in);  // refuse files that are not a model kvlab can run
  const auto st = gguf::convert_file(in, o.out, *target);
  const auto& info = tensor::dtype_info(*target);
  std::printf("%s -> %s: %llu of %llu tensors re-encoded, %s -> %s (matrices: %.2f bits/weight)\n", o.in.c_str(),
              o.out.c_str(), (unsigned long long)st.converted, (unsigned long long)st.tensors,
              human_bytes(double(st.bytes_in)).c_str(), human_bytes(double(st.bytes_out)).c_str(),
              st.matrix_bits_per_weight());
  if (st.fallback)
    std::printf("%llu matrices have rows that are not a whole number of %zu-weight blocks: written as %s, the rest as %s\n",
                (unsigned long long)st.fallback, info.block_size, std::string(tensor::dtype_info(*info.fallback).name).c_str(),
                o.type.c_str());
}

std::vector<std::string> dtype_names() {
  std::vector<std::string> names;
  for (const auto& info : tensor::all_dtypes()) names.emplace_back(info.name);
  return names;
}

}  // namespace

void add_quantize_command(CLI::App& root) {
  auto o = std::make_shared<QuantizeOptions>();
  CLI::App* app = root.add_subcommand("quantize", "convert a GGUF model's matrices to another format");
  app->add_option("IN", o->in, "input GGUF model")->required();
  app->add_option("OUT", o->out, "output GGUF file (written atomically)")->required();
  app->add_option("--type", o->type, "target format")->required()
      ->check(CLI::IsMember(dtype_names()));
  app->callback([o] { quantize(*o); });
}

}  // namespace kvlab::cli
