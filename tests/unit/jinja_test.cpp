// kvlab's Jinja engine on hand-written templates: whitespace control,
// statements, expressions, filters, and its errors and bounds. The models'
// own templates are checked against jinja2 itself (ChatTemplatesMatchJinja2).
#include <gtest/gtest.h>

#include <string>

#include "common/error.h"
#include "jinja/template.h"

namespace kvlab::jinja {
namespace {

std::string render(const std::string& source, const Json& context = Json::object(), const RenderOptions& o = {}) {
  return Template(source).render(context, o);
}

std::string error_of(const std::string& source, const Json& context = Json::object(), const RenderOptions& o = {}) {
  try {
    render(source, context, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// trim_blocks drops the newline after a block tag, lstrip_blocks the
// indentation before one; "-" strips all whitespace on its side; output
// tags are left alone; one final newline of the template goes.
TEST(Jinja, WhitespaceControlAsTransformersSetsIt) {
  EXPECT_EQ(render("{% if true %}\n  a\n  {% endif %}\nb\n"), "  a\nb");
  EXPECT_EQ(render("x  {%- if true -%}  \n y {%- endif %}"), "xy");
  EXPECT_EQ(render("  {{ 'v' }}\n"), "  v");
  EXPECT_EQ(render("a {# note #}\nb"), "a b");
  EXPECT_EQ(render("  {%+ if true %}k{% endif %}"), "  k");
}

TEST(Jinja, LoopsAndTheirVariables) {
  const Json ctx = {{"xs", {"a", "b", "c"}}};
  EXPECT_EQ(render("{% for x in xs %}{{ loop.index }}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}", ctx),
            "1a,2b,3c");
  EXPECT_EQ(render("{% for x in xs if x != 'b' %}{{ loop.index0 }}/{{ loop.length }}{% endfor %}", ctx), "0/21/2");
  EXPECT_EQ(render("{% for x in xs %}{{ loop.previtem }}{% if loop.first %}^{% endif %}{% endfor %}", ctx), "^ab");
  EXPECT_EQ(render("{% for x in [] %}{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in xs %}{% if x == 'b' %}{% break %}{% endif %}{{ x }}{% endfor %}", ctx), "a");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}"), "a=1;b=2;");
}

TEST(Jinja, SetNamespaceAndMacros) {
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}"
                   "{{ ns.n }}"),
            "6");
  EXPECT_EQ(render("{% for i in [1] %}{% set inner = 1 %}{% endfor %}{{ inner is defined }}"), "False");
  EXPECT_EQ(render("{% set b %}x{{ 1 + 1 }}{% endset %}[{{ b }}]"), "[x2]");
  EXPECT_EQ(render("{% macro tag(name, v='d') %}<{{ name }}:{{ v }}>{% endmacro %}{{ tag('a') }}{{ tag('b', v=2) }}"),
            "<a:d><b:2>");
}

TEST(Jinja, ExpressionsFollowPython) {
  EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % -3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1 ~ 'a' }}"),
            "3 -4 -2 3.5 1024 1a");
  EXPECT_EQ(render("{{ 'abc'[::-1] }} {{ [1, 2, 3][-2:] }} {{ 'héllo'[1] }} {{ 'a' if 0 else 'b' }}"),
            "cba [2, 3] é b");
  EXPECT_EQ(render("{{ none }} {{ true }} {{ [1, 'x', none] }} {{ {'k': 'it\\'s'} }}"),
            "None True [1, 'x', None] {'k': \"it's\"}");
  EXPECT_EQ(render("{{ 1 < 2 < 3 }} {{ 3 > 2 > 1 }} {{ 1 < 3 < 2 }} {{ 2 ** 62 }}"),
            "True True False 4611686018427387904");
  EXPECT_EQ(render("{{ 1e15 }} {{ 1e16 }} {{ 1e-5 }} {{ 0.0001 }} {{ 0.1 + 0.2 }} {{ [2.5, -0.0] | tojson }}"),
            "1000000000000000.0 1e+16 1e-05 0.0001 0.30000000000000004 [2.5, -0.0]");
  EXPECT_EQ(render("{{ 'b' in 'abc' }} {{ 2 not in [1] }} {{ x is defined }} {{ 'A' is lower }} {{ 0 or 'y' }}"),
            "True True False False y");
  EXPECT_EQ(render("{{ m.get('a') }}{{ m.missing is none }}{{ m.b.c }}", {{"m", {{"a", 1}, {"b", {{"c", 2}}}}}}),
            "1False2");
}

TEST(Jinja, FiltersAndMethods) {
  EXPECT_EQ(render("{{ ' a b '|trim }}|{{ ' x '.strip() }}|{{ 'a,b'.split(',') }}|{{ 'ab'.startswith(('x', 'a')) }}"),
            "a b|x|['a', 'b']|True");
  EXPECT_EQ(render("{{ d|tojson }}|{{ d|tojson(indent=2) }}", {{"d", Json::parse(R"({"z": [1, "é"], "a": {}})")}}),
            "{\"z\": [1, \"é\"], \"a\": {}}|{\n  \"z\": [\n    1,\n    \"é\"\n  ],\n  \"a\": {}\n}");
  EXPECT_EQ(
      render("{{ ms|selectattr('role', 'equalto', 'user')|map(attribute='c')|join('+') }}",
             {{"ms",
               Json::parse(R"([{"role": "user", "c": "a"}, {"role": "x", "c": "b"}, {"role": "user", "c": "d"}])")}}),
      "a+d");
  EXPECT_EQ(render("{{ x|default('dflt') }} {{ 'hello world'|title }} {{ 'ABC'|lower|capitalize }} {{ [3, 4]|last }}"),
            "dflt Hello World Abc 4");
  EXPECT_EQ(render("{{ 'aXbX'|replace('X', '-') }} {{ '12'|int + 1 }} {{ 'é😀'|length }} {{ strftime_now('%d %b %Y') }}",
                   Json::object(),
                   [] {
                     RenderOptions o;
                     o.now = std::tm{};
                     o.now->tm_mday = 26, o.now->tm_mon = 6, o.now->tm_year = 124;
                     return o;
                   }()),
            "a-b- 13 2 26 Jul 2024");
}

// Errors are one line naming the template line; nothing runs away.
TEST(Jinja, ErrorsNameTheLine) {
  EXPECT_EQ(error_of("a\n{{ raise_exception('Roles must alternate') }}"), "line 2: Roles must alternate");
  EXPECT_EQ(error_of("{% if x %}"), "line 1: missing '{% endif %}' at the end of the template");
  EXPECT_EQ(error_of("\n\n{{ 1 + }}"), "line 3: expected an expression, got '}}'");
  EXPECT_EQ(error_of("{{ x.y }}"), "line 1: 'x' is undefined (attribute access)");
  EXPECT_EQ(error_of("{% for m in none %}{% endfor %}"), "line 1: 'NoneType' object is not iterable");
  EXPECT_EQ(error_of("{% call x() %}{% endcall %}"), "line 1: unknown or unsupported tag 'call'");
  EXPECT_EQ(error_of("{{ 'unterminated }}"), "line 1: unterminated string");
  EXPECT_EQ(error_of("{{ 9223372036854775807 + 1 }}"), "line 1: integer overflow");  // Python's ints would grow
  EXPECT_EQ(error_of("{{ " + std::string(1000, '(') + std::string(1000, ')') + " }}"),
            "line 1: template nested too deeply");
}

TEST(Jinja, BoundsStopRunawayTemplates) {
  RenderOptions small;
  small.max_output_bytes = 100;
  small.max_loop_iterations = 1000;
  EXPECT_EQ(error_of("{% for i in range(10) %}{{ 'x' * 20 }}{% endfor %}", Json::object(), small),
            "line 1: the output exceeds 100 bytes");
  EXPECT_EQ(
      error_of("{% for i in range(999) %}{% for j in range(999) %}{% endfor %}{% endfor %}", Json::object(), small),
      "line 1: the loops exceed 1000 iterations");
  EXPECT_EQ(error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"), "line 1: macros nested more than 64 deep");
  EXPECT_EQ(error_of("{{ 'x' * 100000000000 }}"), "line 1: value too large (repetition)");
  EXPECT_EQ(error_of("{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
            "line 1: value too large (string concatenation)");
  EXPECT_EQ(
      error_of("{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}"),
      "line 1: value too large");
}

TEST(Jinja, ReferencesReportsTheVariablesATemplateReads) {
  const Template t("{% if tools %}{{ tools|tojson }}{% endif %}{% for m in messages %}{% endfor %}");
  EXPECT_TRUE(t.references("tools"));
  EXPECT_TRUE(t.references("messages"));
  EXPECT_FALSE(t.references("documents"));
}

}  // namespace
}  // namespace kvlab::jinja
