#include "jinja/renderer.h"

#include <ctime>
#include <iterator>

#include "jinja/error.h"
#include "jinja/filters.h"
#include "jinja/operations.h"

namespace kvlab::jinja {
namespace {

// Macro calls nested deeper than this (recursion) fail instead of
// exhausting the stack.
constexpr int kMaxCallDepth = 64;

class Renderer {
 public:
  Renderer(const Json& context, const RenderOptions& options) : options_(options) {
    if (!context.is_object()) throw Error("the template context must be an object");
    scopes_.push_back(globals());
    for (auto it = context.begin(); it != context.end(); ++it) scopes_[0][it.key()] = Value(it.value());
    scopes_.emplace_back();  // the template's own variables
  }

  std::string run(const Body& body) {
    std::string out;
    out_ = &out;
    exec(body);
    return out;
  }

 private:
  enum class Flow { Normal, Break, Continue };

  // ---------------------------------------------------------------- globals
  Namespace globals() {
    Namespace g;
    // transformers' raise_exception: the template's own error message.
    g["raise_exception"] = Value::callable([](CallArgs& a) -> Value {
      throw EvalError(a.positional.empty() ? "raise_exception()" : a.positional[0].str());
    });
    // transformers' strftime_now: datetime.now().strftime(format).
    g["strftime_now"] = Value::callable([this](CallArgs& a) { return Value(Json(strftime_now(a))); });
    g["namespace"] = Value::callable([](CallArgs& a) {
      Namespace attrs;
      for (const Value& arg : a.positional) {
        const Json& dict = arg.as_data("namespace()");
        if (!dict.is_object()) throw EvalError("namespace() takes a dict or keyword arguments");
        for (auto it = dict.begin(); it != dict.end(); ++it) attrs[it.key()] = Value(it.value());
      }
      for (auto& [key, value] : a.keyword) attrs[key] = value;
      return Value::make_namespace(std::move(attrs));
    });
    g["dict"] = Value::callable([](CallArgs& a) {
      Json d = Json::object();
      for (auto& [key, value] : a.keyword) d[key] = value.as_data("dict()");
      check_value_size(d);
      return Value(d);
    });
    g["range"] = Value::callable([this](CallArgs& a) { return range(a); });
    return g;
  }

  std::string strftime_now(const CallArgs& a) {
    if (a.positional.empty()) throw EvalError("strftime_now() needs a format");
    std::tm t{};
    if (options_.now) {
      t = *options_.now;
    } else {
      const std::time_t now = std::time(nullptr);
      localtime_r(&now, &t);
    }
    char buf[512];
    const size_t n = std::strftime(buf, sizeof buf, a.positional[0].str().c_str(), &t);
    return std::string(buf, n);
  }

  // Python's range(stop) / range(start, stop[, step]), as a list.
  Value range(const CallArgs& a) {
    if (a.positional.empty() || a.positional.size() > 3) throw EvalError("range() takes 1 to 3 arguments");
    const bool one = a.positional.size() == 1;
    const int64_t start = one ? 0 : to_integer(a.positional[0], "range()");
    const int64_t stop = to_integer(a.positional[one ? 0 : 1], "range()");
    const int64_t step = a.positional.size() == 3 ? to_integer(a.positional[2], "range()") : 1;
    if (step == 0) throw EvalError("range() arg 3 must not be zero");
    Json out = Json::array();
    for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
      if (out.size() >= options_.max_loop_iterations) throw EvalError("range() too large");
      out.push_back(i);
      if (__builtin_add_overflow(i, step, &i)) break;  // past the end of int64, so past stop
    }
    return out;
  }

  // ---------------------------------------------------------------- output
  void emit(std::string_view text, int line) {
    if (out_->size() + text.size() > options_.max_output_bytes)
      fail_at(line, "the output exceeds " + std::to_string(options_.max_output_bytes) + " bytes");
    out_->append(text);
  }

  std::string render_to_string(const Body& body) {
    std::string text;
    std::string* outer = std::exchange(out_, &text);
    exec(body);
    out_ = outer;
    return text;
  }

  void count_iteration(int line) {
    if (++iterations_ > options_.max_loop_iterations)
      fail_at(line, "the loops exceed " + std::to_string(options_.max_loop_iterations) + " iterations");
  }

  // ---------------------------------------------------------------- statements
  Flow exec(const Body& body) {
    for (const StmtPtr& s : body) {
      Flow f = Flow::Normal;
      try {
        f = std::visit([&](const auto& node) { return exec_node(node, s->line); }, s->node);
      } catch (const EvalError& err) {  // from the statement itself (a for loop's iteration, ...)
        fail_at(s->line, err.what());
      }
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

  Flow exec_node(const TextStmt& s, int line) {
    emit(s.text, line);
    return Flow::Normal;
  }

  Flow exec_node(const OutputStmt& s, int line) {
    emit(eval(*s.value).str(), line);
    return Flow::Normal;
  }

  Flow exec_node(const IfStmt& s, int) {
    for (const auto& [condition, body] : s.branches)
      if (eval(*condition).truthy()) return exec(body);
    return exec(s.otherwise);
  }

  Flow exec_node(const ForStmt& s, int line) {
    std::vector<Json> items = iterate(eval(*s.iterable));
    scopes_.emplace_back();
    if (s.filter) {
      std::vector<Json> kept;
      for (Json& item : items) {
        count_iteration(line);
        bind(s.targets, item, line);
        if (eval(*s.filter).truthy()) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    for (size_t i = 0; i < items.size(); ++i) {
      count_iteration(line);
      bind(s.targets, items[i], line);
      scopes_.back()["loop"] = Value(loop_object(items, i));
      if (exec(s.body) == Flow::Break) break;
    }
    scopes_.pop_back();
    if (items.empty()) return exec(s.otherwise);
    return Flow::Normal;
  }

  // jinja2's loop variable.
  static Json loop_object(const std::vector<Json>& items, size_t i) {
    const size_t n = items.size();
    Json loop = {{"index", i + 1},  {"index0", i},        {"revindex", n - i}, {"revindex0", n - i - 1},
                 {"first", i == 0}, {"last", i + 1 == n}, {"length", n},       {"depth", 1},
                 {"depth0", 0}};
    if (i > 0) loop["previtem"] = items[i - 1];
    if (i + 1 < n) loop["nextitem"] = items[i + 1];
    return loop;
  }

  void bind(const std::vector<std::string>& targets, const Value& value, int line) {
    if (targets.size() == 1) {
      scopes_.back()[targets[0]] = value;
      return;
    }
    if (!value.is_data() || !value.data().is_array() || value.data().size() != targets.size())
      fail_at(line, "cannot unpack " + value.str() + " into " + std::to_string(targets.size()) + " names");
    for (size_t i = 0; i < targets.size(); ++i) scopes_.back()[targets[i]] = Value(value.data()[i]);
  }

  Flow exec_node(const SetStmt& s, int line) {
    Value value = s.value ? eval(*s.value) : Value(Json(render_to_string(s.body)));
    if (s.attr.empty()) {
      bind(s.targets, value, line);
      return Flow::Normal;
    }
    const Value ns = lookup(s.targets[0]);
    if (ns.kind() != Value::Kind::Namespace) fail_at(line, "cannot assign attribute on non-namespace object");
    ns.attrs()[s.attr] = std::move(value);
    return Flow::Normal;
  }

  Flow exec_node(const MacroStmt& s, int) {
    const MacroStmt* macro = &s;
    scopes_.back()[s.name] = Value::callable([this, macro](CallArgs& a) { return call_macro(*macro, a); });
    return Flow::Normal;
  }

  Flow exec_node(const LoopControl& s, int) { return s.is_break ? Flow::Break : Flow::Continue; }

  Flow exec_node(const FilterBlock& s, int line) {
    const Value text = Json(render_to_string(s.body));
    emit(apply_filter(s.name, text, eval_args(s.args)).str(), line);
    return Flow::Normal;
  }

  // A macro sees the globals, the template's variables and its parameters,
  // not the variables of the loops it is called from.
  Value call_macro(const MacroStmt& m, const CallArgs& a) {
    if (call_depth_ >= kMaxCallDepth)
      throw EvalError("macros nested more than " + std::to_string(kMaxCallDepth) + " deep");
    Namespace frame;
    for (size_t i = 0; i < m.params.size(); ++i) {
      const auto& [name, fallback] = m.params[i];
      const Value* given = a.find(i, name);
      frame[name] = given ? *given : fallback ? eval(*fallback) : Value::undefined(name);
    }
    std::vector<Namespace> callers(std::make_move_iterator(scopes_.begin() + 2),
                                   std::make_move_iterator(scopes_.end()));
    scopes_.resize(2);
    scopes_.push_back(std::move(frame));
    ++call_depth_;
    std::string text = render_to_string(m.body);
    --call_depth_;
    scopes_.resize(2);
    for (Namespace& scope : callers) scopes_.push_back(std::move(scope));
    return Json(std::move(text));
  }

  // ---------------------------------------------------------------- expressions
  Value eval(const Expr& e) {
    try {
      Value v = std::visit([&](const auto& node) { return eval_node(node); }, e.node);
      // Filters and methods that build strings (replace, join, indent, ...)
      // stay bounded too.
      if (v.is_data() && v.data().is_string() && v.data().get_ref<const std::string&>().size() > kMaxValueBytes)
        throw EvalError("value too large");
      return v;
    } catch (const EvalError& err) {
      fail_at(e.line, err.what());
    }
  }

  Value lookup(const std::string& name) const {
    for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope) {
      const auto it = scope->find(name);
      if (it != scope->end()) return it->second;
    }
    return Value::undefined(name);
  }

  CallArgs eval_args(const Args& args) {
    CallArgs out;
    for (const ExprPtr& p : args.positional) out.positional.push_back(eval(*p));
    for (const auto& [key, value] : args.keyword) out.keyword.emplace_back(key, eval(*value));
    return out;
  }

  Value eval_node(const Literal& n) { return n.value; }
  Value eval_node(const Name& n) { return lookup(n.id); }
  Value eval_node(const GetAttr& n) { return get_attr(eval(*n.object), n.attr); }
  Value eval_node(const GetItem& n) { return get_item(eval(*n.object), eval(*n.index)); }

  Value eval_node(const ListExpr& n) {
    Json list = Json::array();
    for (const ExprPtr& item : n.items) list.push_back(eval(*item).as_data("a list"));
    check_value_size(list);
    return list;
  }

  Value eval_node(const DictExpr& n) {
    Json dict = Json::object();
    for (const auto& [key, value] : n.entries) dict[eval(*key).str()] = eval(*value).as_data("a dict");
    check_value_size(dict);
    return dict;
  }

  Value eval_node(const SliceExpr& n) {
    const Value object = eval(*n.object);
    const auto part = [&](const ExprPtr& p) { return p ? std::optional<Value>(eval(*p)) : std::nullopt; };
    const std::optional<Value> start = part(n.start), stop = part(n.stop), step = part(n.step);
    return slice(object, start ? &*start : nullptr, stop ? &*stop : nullptr, step ? &*step : nullptr);
  }

  Value eval_node(const Call& n) {
    if (const auto* method = std::get_if<GetAttr>(&n.callee->node)) {
      const Value object = eval(*method->object);
      if (object.kind() != Value::Kind::Namespace) return call_method(object, method->attr, eval_args(n.args));
    }
    const Value f = eval(*n.callee);
    if (f.kind() != Value::Kind::Callable) {
      if (f.is_undefined()) throw EvalError("'" + f.undefined_name() + "' is undefined");
      throw EvalError("'" + f.str() + "' is not callable");
    }
    CallArgs args = eval_args(n.args);
    return f.function()(args);
  }

  Value eval_node(const FilterExpr& n) { return apply_filter(n.name, eval(*n.value), eval_args(n.args)); }
  Value eval_node(const TestExpr& n) {
    return Json(apply_test(n.name, eval(*n.value), eval_args(n.args)) != n.negated);
  }

  Value eval_node(const Unary& n) {
    const Value operand = eval(*n.operand);
    if (n.op == "not") return Json(!operand.truthy());
    if (n.op == "-") return negate(operand);
    return negate(negate(operand));  // unary +: a number, unchanged
  }

  Value eval_node(const Binary& n) {
    Value lhs = eval(*n.lhs);
    // Python's and/or return the operand that decided, not a bool.
    if (n.op == "and") return lhs.truthy() ? eval(*n.rhs) : lhs;
    if (n.op == "or") return lhs.truthy() ? lhs : eval(*n.rhs);
    return binary_op(n.op, lhs, eval(*n.rhs));
  }

  Value eval_node(const Compare& n) {
    Value lhs = eval(*n.first);
    for (const auto& [op, operand] : n.rest) {
      Value rhs = eval(*operand);
      if (!binary_op(op, lhs, rhs).truthy()) return Json(false);
      lhs = std::move(rhs);
    }
    return Json(true);
  }

  Value eval_node(const Conditional& n) {
    if (eval(*n.condition).truthy()) return eval(*n.then);
    return n.otherwise ? eval(*n.otherwise) : Value::undefined("conditional");
  }

  const RenderOptions& options_;
  std::vector<Namespace> scopes_;  // globals and context, the template's variables, then loops and macro calls
  std::string* out_ = nullptr;
  size_t iterations_ = 0;
  int call_depth_ = 0;
};

}  // namespace

std::string render_body(const Body& body, const Json& context, const RenderOptions& options) {
  return Renderer(context, options).run(body);
}

}  // namespace kvlab::jinja
