// Focused tests of the Jinja interpreter. The tables' expected outputs and
// error messages were produced by Jinja2 3.1 configured as Hugging Face
// transformers configures it (sandboxed, trim_blocks, lstrip_blocks, loop
// controls, tojson(ensure_ascii=False)): they are the reference, not our output.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "jinja/pystr.h"
#include "jinja/template.h"

namespace tokamak {
namespace {

using jinja::ErrorKind;
using jinja::TemplateError;

std::string render(std::string_view tmpl, std::string_view context_json = "{}", jinja::RenderLimits limits = {}) {
  jinja::Variables vars;
  const auto ctx = nlohmann::ordered_json::parse(context_json);
  for (auto it = ctx.begin(); it != ctx.end(); ++it) vars.emplace_back(it.key(), jinja::from_json(it.value()));
  jinja::RenderOptions options;
  options.now_unix_seconds = 1768435200;  // 2026-01-15 00:00:00 UTC (a Thursday)
  options.limits = limits;
  return jinja::Template::parse(tmpl).render(vars, options);
}

struct Case {
  const char* tmpl;
  const char* context;
  const char* expected;
};

void expect_renders(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    SCOPED_TRACE(c.tmpl);
    try {
      EXPECT_EQ(render(c.tmpl, c.context), c.expected);
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

struct ErrorCase {
  const char* tmpl;
  const char* context;
  ErrorKind kind;
  const char* detail;
};

void expect_errors(const std::vector<ErrorCase>& cases) {
  for (const ErrorCase& c : cases) {
    SCOPED_TRACE(c.tmpl);
    try {
      const std::string out = render(c.tmpl, c.context);
      ADD_FAILURE() << "rendered " << out;
    } catch (const TemplateError& e) {
      EXPECT_EQ(e.kind(), c.kind) << e.what();
      EXPECT_EQ(e.detail(), c.detail) << e.what();
      EXPECT_GT(e.pos().line, 0u) << e.what();
    }
  }
}

// Returns the error a template raises (parse or render); fails the test if none.
TemplateError error_of(std::string_view tmpl, std::string_view context = "{}", jinja::RenderLimits limits = {}) {
  try {
    render(tmpl, context, limits);
  } catch (const TemplateError& e) {
    return e;
  }
  ADD_FAILURE() << "no error from " << tmpl;
  return TemplateError(ErrorKind::Runtime, "none");
}

TEST(JinjaWhitespace, MatchesJinja2) {
  expect_renders({
      {R"~(  {% if true %}
  x
  {% endif %}
  {{ 'y' }}
  {# c #}
z)~",
       R"~({})~",
       R"~(  x
  y
z)~"},
      {R"~(a  {%- if true -%}  b  {%- endif -%}  c
)~",
       R"~({})~",
       R"~(abc)~"},
      {R"~({%+ if true %}x{% endif +%}
y)~",
       R"~({})~",
       R"~(x
y)~"},
      {R"~({% raw %}
 {{ x }}{% endraw %}
{{ 1 }})~",
       R"~({})~",
       R"~(
 {{ x }}1)~"},
      {R"~({% raw -%}  {% if %}  {%- endraw %}|)~",
       R"~({})~",
       R"~({% if %}|)~"},
      {"x\r\ny\r\n",
       R"~({})~",
       R"~(x
y)~"},
      {R"~({{- ' a ' -}}

{{ 'b' }}
)~",
       R"~({})~",
       R"~( a b)~"},
      {R"~(line1
    {%- set x = 1 %}
{{ x }})~",
       R"~({})~",
       R"~(line11)~"},
      {R"~({# comment #}
A
  {#- c -#}  B)~",
       R"~({})~",
       R"~(AB)~"},
      {R"~(<{% for i in [1,2] %}
  {{ i }}
{% endfor %}>)~",
       R"~({})~",
       R"~(<  1
  2
>)~"},
      {"\t {% if true %}x{% endif %} \t\nend",
       R"~({})~",
       "x \t\nend"},
      {R"~(a {% if true %}x{% endif %})~",
       R"~({})~",
       R"~(a x)~"},
      {R"~({{ 'a' }}  {% if true %}b{% endif %})~",
       R"~({})~",
       R"~(a  b)~"},
      {R"~({% for m in messages %}
    {{- m.role }}:{{ m.content }}
{% endfor %})~",
       R"~({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]})~",
       R"~(system:S
user:Hi
assistant:Yo
)~"},
      {R"~({%- for m in messages -%}
  [{{ m.content }}]
{%- endfor -%}
)~",
       R"~({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]})~",
       R"~([S][Hi][Yo])~"},
      {R"~({{ 1 }}
{{ 2 }}
)~",
       R"~({})~",
       R"~(1
2)~"},
      {R"~({% if true %}

{% endif %})~",
       R"~({})~",
       R"~(
)~"},
  });
}

TEST(JinjaLoops, MatchesJinja2) {
  expect_renders({
      {R"~({% for x in ['a','b','c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %})~",
       R"~({})~",
       R"~(1032TrueFalse3;2121FalseFalse3;3210FalseTrue3;)~"},
      {R"~({% for x in [1,2,3] %}{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }}|{% endfor %})~",
       R"~({})~",
       R"~(<1>2|1<2>3|2<3>|)~"},
      {R"~({% for x in [1,2,3] %}{{ loop.cycle('odd', 'even') }}{% endfor %})~",
       R"~({})~",
       R"~(oddevenodd)~"},
      {R"~({% for x in [1,2,3,4] if x is even %}{{ x }}/{{ loop.length }}{% else %}none{% endfor %})~",
       R"~({})~",
       R"~(2/24/2)~"},
      {R"~({% for x in [] %}{{ x }}{% else %}empty{% endfor %})~",
       R"~({})~",
       R"~(empty)~"},
      {R"~({% for x in [1, 2] %}{% break %}{% else %}[else after break in the first iteration]{% endfor %})~",
       R"~({})~",
       R"~([else after break in the first iteration])~"},
      {R"~({% for x in [1, 2] %}{% if x == 2 %}{% break %}{% endif %}{% else %}never{% endfor %})~",
       R"~({})~",
       R"~()~"},
      {R"~({% for x in [1, 2] %}{% continue %}{% else %}[else when every iteration continues]{% endfor %})~",
       R"~({})~",
       R"~([else when every iteration continues])~"},
      {R"~({% for x in [1,3] if x is even %}{{ x }}{% else %}no evens{% endfor %})~",
       R"~({})~",
       R"~(no evens)~"},
      {R"~({% for x in [1,2] %}{% for y in 'ab' %}{{ loop.index }}{{ y }}{% endfor %}{{ loop.index }} {% endfor %})~",
       R"~({})~",
       R"~(1a2b1 1a2b2 )~"},
      {R"~({% for i in range(10) %}{% if i is odd %}{% continue %}{% endif %}{% if i > 6 %}{% break %}{% endif %}{{ i }}{% endfor %})~",
       R"~({})~",
       R"~(0246)~"},
      {R"~({% for k, v in {'b': 1, 'a': 2}.items() %}{{ k }}={{ v }};{% endfor %})~",
       R"~({})~",
       R"~(b=1;a=2;)~"},
      {R"~({% for k in {'b': 1, 'a': 2} %}{{ k }}{% endfor %})~",
       R"~({})~",
       R"~(ba)~"},
      {R"~({% for c in 'héllo' %}[{{ c }}]{% endfor %})~",
       R"~({})~",
       R"~([h][é][l][l][o])~"},
      {R"~({% for x in undefined_thing %}{{ x }}{% else %}nothing{% endfor %})~",
       R"~({})~",
       R"~(nothing)~"},
      {R"~({% for a, b in [[1, 2], (3, 4)] %}{{ a + b }},{% endfor %})~",
       R"~({})~",
       R"~(3,7,)~"},
      {R"~({% set x = 'outer' %}{% for i in [1] %}{% set x = 'inner' %}{{ x }}{% endfor %} {{ x }})~",
       R"~({})~",
       R"~(inner outer)~"},
      {R"~({% for i in [1,2] %}{% if i == 2 %}{{ seen }}{% endif %}{% set seen = i %}{% endfor %}|{{ seen }})~",
       R"~({})~",
       R"~(|)~"},
      {R"~({% for m in messages %}{% if loop.first %}{{ m.role }}{% elif loop.last %}{{ m.content }}{% else %}-{% endif %}{% endfor %})~",
       R"~({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]})~",
       R"~(system-Yo)~"},
      {R"~({{ loop }}|{% for x in [1] %}{{ loop.depth }}{{ loop.depth0 }}{% endfor %})~",
       R"~({})~",
       R"~(|10)~"},
  });
}

TEST(JinjaScoping, MatchesJinja2) {
  expect_renders({
      {R"~({% for i in [1] %}[{{ x }}]{% endfor %}{% set x = 'late' %}[{{ x }}])~",
       R"~({"x": "context"})~",
       R"~([][late])~"},
      {R"~({% macro show() %}[{{ x }}]{% endmacro %}{{ show() }}{% set x = 'late' %}{{ show() }})~",
       R"~({"x": "context"})~",
       R"~([][late])~"},
      {R"~({% set b %}[{{ x }}]{% endset %}{{ b }}{% set x = 'late' %})~",
       R"~({"x": "context"})~",
       R"~([])~"},
      {R"~({{ x }}{% for i in [1] %}[{{ x }}]{% endfor %}{% set x = 'late' %})~",
       R"~({"x": "context"})~",
       R"~(context[context])~"},
      {R"~({% if false %}{% set x = 'never' %}{% endif %}{% for i in [1] %}[{{ x }}]{% endfor %})~",
       R"~({"x": "context"})~",
       R"~([context])~"},
      {R"~({% set x = x ~ '+' %}{% for i in [1] %}[{{ x }}]{% endfor %})~",
       R"~({"x": "context"})~",
       R"~([context+])~"},
      {R"~({% for i in [1, 2] %}{% for j in [1] %}[{{ x }}]{% endfor %}{% set x = i %}{% endfor %})~",
       R"~({"x": "context"})~",
       R"~([][])~"},
      {R"~({% if not tools is defined %}{% set tools = none %}{% endif %}{{ tools }})~",
       R"~({"tools": [1]})~",
       R"~([1])~"},
  });
}

TEST(JinjaNamespace, MatchesJinja2) {
  expect_renders({
      {R"~({% set ns = namespace(count=0, found=false) %}{% for m in messages %}{% if m.role == 'user' %}{% set ns.count = ns.count + 1 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.count }} {{ ns.found }})~",
       R"~({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]})~",
       R"~(1 True)~"},
      {R"~({% set ns = namespace() %}{% set ns.items = [1] %}{% set ns.items = ns.items + [2] %}{{ ns.items }} {{ ns }})~",
       R"~({})~",
       R"~([1, 2] <Namespace {'items': [1, 2]}>)~"},
      {R"~({% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}{{ ns['a'] }}{{ ns.missing is defined }})~",
       R"~({})~",
       R"~(121False)~"},
      {R"~({% set ns = namespace(v='') %}{% macro add(x) %}{% set ns.v = ns.v ~ x %}{% endmacro %}{{ add('a') }}{{ add('b') }}{{ ns.v }})~",
       R"~({})~",
       R"~(ab)~"},
      {R"~({% set a = namespace(x=1) %}{% set b = a %}{% set b.x = 2 %}{{ a.x }})~",
       R"~({})~",
       R"~(2)~"},
  });
}

TEST(JinjaSet, MatchesJinja2) {
  expect_renders({
      {R"~({% set x = 1 %}{% set x = x + 1 %}{{ x }})~",
       R"~({})~",
       R"~(2)~"},
      {R"~({% set a, b = [1, 2] %}{% set c, d = 'xy' %}{{ a }}{{ b }}{{ c }}{{ d }})~",
       R"~({})~",
       R"~(12xy)~"},
      {R"~({% set t = 1, 2 %}{{ t }})~",
       R"~({})~",
       R"~((1, 2))~"},
      {R"~({% if true %}{% set x = 'set in if' %}{% endif %}{{ x }})~",
       R"~({})~",
       R"~(set in if)~"},
      {R"~({% set block %}  Hello {{ 'World' }}  {% endset %}[{{ block }}])~",
       R"~({})~",
       R"~([  Hello World  ])~"},
      {R"~({% set block | trim | upper %}  Hello  {% endset %}[{{ block }}])~",
       R"~({})~",
       R"~([HELLO])~"},
      {R"~({% set messages = messages[1:] %}{{ messages | length }})~",
       R"~({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]})~",
       R"~(2)~"},
      {R"~({% with a = 1, b = 2 %}{{ a + b }}{% set c = 3 %}{% endwith %}[{{ a }}{{ c }}])~",
       R"~({})~",
       R"~(3[])~"},
      {R"~({% filter upper %}hello {{ 'x' }}{% endfilter %})~",
       R"~({})~",
       R"~(HELLO X)~"},
  });
}

TEST(JinjaMacros, MatchesJinja2) {
  expect_renders({
      {R"~({% macro greet(name, punct='!') %}Hello {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', '?') }} {{ greet(punct='.', name='C') }})~",
       R"~({})~",
       R"~(Hello A! Hello B? Hello C.)~"},
      {R"~({% macro m(a, b=a * 2) %}{{ a }},{{ b }}{% endmacro %}{{ m(3) }})~",
       R"~({})~",
       R"~(3,6)~"},
      {R"~({% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k='v') }})~",
       R"~({})~",
       R"~(1(2, 3){'k': 'v'})~"},
      {R"~({% macro m(a) %}[{{ a }}]{% endmacro %}{{ m() }})~",
       R"~({})~",
       R"~([])~"},
      {R"~({% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1) | int }}{% endif %}{% endmacro %}{{ fact(5) }})~",
       R"~({})~",
       R"~(120)~"},
      {R"~({% macro show() %}{{ later }}{% endmacro %}{% set later = 'visible' %}{{ show() }})~",
       R"~({})~",
       R"~(visible)~"},
      {R"~({% for i in [1, 2] %}{% macro m() %}{{ i }}{% endmacro %}{{ m() }}{% endfor %})~",
       R"~({})~",
       R"~(12)~"},
      {R"~({% macro namespace_param(namespace='fns') %}{{ namespace }}{% endmacro %}{{ namespace_param() }})~",
       R"~({})~",
       R"~(fns)~"},
      {R"~({% macro m() %}x{% endmacro %}{{ m() ~ m() }}|{{ (m() + 'y') | length }})~",
       R"~({})~",
       R"~(xx|2)~"},
  });
}

TEST(JinjaExpressions, MatchesJinja2) {
  expect_renders({
      {R"~({{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 6 / 3 }})~",
       R"~({})~",
       R"~(7 9 64 4 3 -4 1 2 3.5 2.0)~"},
      {R"~({{ 1.5 + 1 }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e15 }} {{ 1e-5 }} {{ 2.5e-3 }} {{ 1_000 }} {{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 3.0 }})~",
       R"~({})~",
       R"~(2.5 0.30000000000000004 1e+16 1000000000000000.0 1e-05 0.0025 1000 31 15 5 3.0)~"},
      {R"~({{ true + 1 }} {{ true == 1 }} {{ 1 == 1.0 }} {{ 'a' == 'a' }} {{ [1, 2] == [1, 2] }} {{ (1, 2) == [1, 2] }} {{ {'a': 1} == {'a': 1} }} {{ none == none }})~",
       R"~({})~",
       R"~(2 True True True True False True True)~"},
      {R"~({{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'abc' < 'abd' }} {{ [1, 2] < [1, 3] }} {{ 2 >= 2.0 }} {{ 1 != 2 }})~",
       R"~({})~",
       R"~(True False True True True True)~"},
      {R"~({{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }} {{ not 'a' in 'abc' }} {{ 1 in undefined_thing }})~",
       R"~({})~",
       R"~(True True True True False False)~"},
      {R"~({{ 'a' ~ 1 ~ none ~ true ~ 1.5 ~ [1] ~ undefined_thing }})~",
       R"~({})~",
       R"~(a1NoneTrue1.5[1])~"},
      {R"~({{ 'yes' if 1 else 'no' }} {{ 'yes' if 0 else 'no' }} [{{ 'x' if false }}] {{ 1 if false else 2 if false else 3 }})~",
       R"~({})~",
       R"~(yes no [] 3)~"},
      {R"~({{ 0 or 'default' }} {{ 'first' or 'second' }} {{ 1 and 'both' }} {{ 0 and 'never' }} {{ none or [] or 'z' }} {{ not none }})~",
       R"~({})~",
       R"~(default first both 0 z True)~"},
      {R"~({{ [1, 2, 3, 4, 5][1:3] }} {{ [1, 2, 3][::-1] }} {{ 'hello'[1:] }} {{ 'hello'[-3:] }} {{ 'hello'[::2] }} {{ [1, 2, 3][-1] }} {{ 'héllo'[1] }} {{ [1,2,3][5:] }})~",
       R"~({})~",
       R"~([2, 3] [3, 2, 1] ello llo hlo 3 é [])~"},
      {R"~({{ [1, 'a', none, true, 1.5, [2], {'k': 'v'}] }} {{ (1,) }} {{ () }} {{ {'q': "it's"} }})~",
       R"~({})~",
       R"~([1, 'a', None, True, 1.5, [2], {'k': 'v'}] (1,) () {'q': "it's"})~"},
      {R"~({{ {'a': 1}['a'] }} {{ {'a': {'b': 2}}.a.b }} {{ [[1, 2]][0][1] }} {{ messages[0].role }} {{ messages.0.content }})~",
       R"~({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]})~",
       R"~(1 2 2 system S)~"},
      {R"~([{{ missing }}] [{{ {}.missing }}] [{{ [][3] }}] [{{ none.attr }}] [{{ 'abc'.nope }}] {{ missing is defined }} {{ {}.x is defined }})~",
       R"~({})~",
       R"~([] [] [] [] [] False False)~"},
      {R"~({{ 'x' * 3 }} {{ [0] * 2 }} {{ 2 * 'ab' }} {{ [1] + [2] }} {{ 'a' + 'b' }} {{ -(3) }} {{ +3 }})~",
       R"~({})~",
       R"~(xxx [0, 0] abab [1, 2] ab -3 3)~"},
      {R"~({{ 'a' 'b' "c" }} {{ '\n\t\\\'' | length }} {{ '\u00e9\x41' }})~",
       R"~({})~",
       R"~(abc 4 éA)~"},
      {R"~({{ '%s is %d years' % ('Al', 30) }} {{ '%05.1f|%-4s|%x' % (3.14159, 'ab', 255) }} {{ '%s' % 'solo' }})~",
       R"~({})~",
       R"~(Al is 30 years 003.1|ab  |ff solo)~"},
      {R"~({{ 1, 2 }} {{ (1) }} {{ ((1, 2)) }})~",
       R"~({})~",
       R"~((1, 2) 1 (1, 2))~"},
      {R"~({{ range(3) | list }} {{ range(1, 7, 2) | list }} {{ range(3, 0, -1) | list }} {{ dict(a=1, b='x') }})~",
       R"~({})~",
       R"~([0, 1, 2] [1, 3, 5] [3, 2, 1] {'a': 1, 'b': 'x'})~"},
  });
}

TEST(JinjaFilters, MatchesJinja2) {
  expect_renders({
      {R"~({{ '  hi  ' | trim }}|{{ 'xxhixx' | trim('x') }}|{{ 'Hello' | upper }}|{{ 'Hello' | lower }}|{{ 'hello world' | capitalize }}|{{ 'hello wORLD-foo (bar)' | title }})~",
       R"~({})~",
       R"~(hi|hi|HELLO|hello|Hello world|Hello World-Foo (Bar))~"},
      {R"~({{ [1, 2, 3] | length }} {{ 'héllo' | length }} {{ {'a': 1} | count }} {{ undefined_thing | length }})~",
       R"~({})~",
       R"~(3 5 1 0)~"},
      {R"~({{ ['a', 'b'] | join(', ') }} {{ [1, 2] | join }} {{ [{'n': 'x'}, {'n': 'y'}] | join('-', attribute='n') }})~",
       R"~({})~",
       R"~(a, b 12 x-y)~"},
      {R"~({{ 'aXbXc' | replace('X', '-') }} {{ 'aXbXc' | replace('X', '-', 1) }} {{ 'ab' | replace('', '.') }})~",
       R"~({})~",
       R"~(a-b-c a-bXc .a.b.)~"},
      {R"~({{ undefined_thing | default('d') }} {{ none | default('d') }} {{ '' | default('d', true) }} {{ 0 | d('zero', boolean=true) }} {{ 'set' | default('d') }})~",
       R"~({})~",
       R"~(d None d zero set)~"},
      {R"~({{ [3, 1, 2] | first }} {{ [3, 1, 2] | last }} {{ 'abc' | first }} {{ [] | first is defined }})~",
       R"~({})~",
       R"~(3 2 a False)~"},
      {R"~({{ 'abc' | list }} {{ {'k': 1, 'j': 2} | list }} {{ {'k': 1} | items | list }} {{ undefined_thing | items | list }})~",
       R"~({})~",
       R"~(['a', 'b', 'c'] ['k', 'j'] [('k', 1)] [])~"},
      {R"~({{ [{'r': 'u', 'c': 1}, {'r': 'a'}, {'r': 'u', 'c': 3}] | selectattr('r', 'equalto', 'u') | map(attribute='c') | list }})~",
       R"~({})~",
       R"~([1, 3])~"},
      {R"~({{ [{'a': 1}, {'a': 0}, {}] | selectattr('a') | list }} {{ [{'a': 1}, {'a': 0}, {}] | rejectattr('a') | list }} {{ [{'a': 1}, {}] | selectattr('a', 'defined') | list }})~",
       R"~({})~",
       R"~([{'a': 1}] [{'a': 0}, {}] [{'a': 1}])~"},
      {R"~({{ [1, 2, 3, 4] | select('odd') | list }} {{ [1, 2, 3, 4] | reject('odd') | list }} {{ [0, 1, '', 'x'] | select | list }} {{ [1, 5, 10] | select('gt', 3) | list }})~",
       R"~({})~",
       R"~([1, 3] [2, 4] [1, 'x'] [5, 10])~"},
      {R"~({{ ['a', 'b'] | map('upper') | list }} {{ [{'a': {'b': 7}}] | map(attribute='a.b') | list }} {{ [{}] | map(attribute='x', default='dflt') | list }} {{ [[1, 2]] | map(attribute='1') | list }})~",
       R"~({})~",
       R"~(['A', 'B'] [7] ['dflt'] [2])~"},
      {R"~({{ 42 | string }}{{ [1] | string }} {{ '42' | int + 1 }} {{ '3.9' | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ 3.9 | int }} {{ '0x1A' | int(base=16) }} {{ '2.5' | float }} {{ 'x' | float }})~",
       R"~({})~",
       R"~(42[1] 43 3 0 7 3 26 2.5 0.0)~"},
      {R"~({{ s | indent }})~",
       R"~({"s": "a\n b"})~",
       R"~(a
     b)~"},
      {R"~({{ 'x' | safe }} {{ '<a>' | e }} {{ '<b>' | escape | escape }} {{ '<' | safe + '<' }} {{ '<' ~ '<' | safe }} {{ ('<i>' | safe).upper() }})~",
       R"~({})~",
       R"~(x &lt;a&gt; &lt;b&gt; <&lt; << <I>)~"},
      {R"~({{ [3, 1, 2] | sort }} {{ [3, 1, 2] | sort(reverse=true) }} {{ ['b', 'A', 'c'] | sort }} {{ ['b', 'A', 'c'] | sort(case_sensitive=true) }} {{ [{'n': 2}, {'n': 1}] | sort(attribute='n') }})~",
       R"~({})~",
       R"~([1, 2, 3] [3, 2, 1] ['A', 'b', 'c'] ['A', 'b', 'c'] [{'n': 1}, {'n': 2}])~"},
      {R"~({{ ['a', 'A', 'b', 'a'] | unique | list }} {{ ['a', 'A'] | unique(case_sensitive=true) | list }} {{ {'b': 1, 'a': 2} | dictsort }} {{ {'b': 1, 'a': 2} | dictsort(by='value', reverse=true) }})~",
       R"~({})~",
       R"~(['a', 'b'] ['a', 'A'] [('a', 2), ('b', 1)] [('a', 2), ('b', 1)])~"},
      {R"~({{ [1, 2, 3] | reverse | list }} {{ 'abc' | reverse }} {{ [1, 2, 3] | sum }} {{ [{'v': 2}, {'v': 3}] | sum(attribute='v') }} {{ [4, 9, 1] | max }} {{ ['b', 'A'] | min }} {{ -3 | abs }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 2.675 | round(2) }} {{ 2.1 | round(method='ceil') }} {{ 7 | round }})~",
       R"~({})~",
       R"~([3, 2, 1] cba 6 5 9 A 3 2.0 4.0 2.67 3.0 7)~"},
      {R"~({{ 'a
b

c' | indent }}|{{ 'a
b' | indent(2, first=true) }}|{{ 'a

b' | indent('> ', blank=true) }}|{{ '' | indent(first=true) }})~",
       R"~({})~",
       R"~(a
    b

    c|  a
  b|a
> 
> b|    )~"},
      {"[{{ '  x 　' | trim }}] [{{ '\t\n x \037' | trim }}] [{{ '  x '.strip() }}] [{{ '..x..' | trim('.') }}]",
       R"~({})~",
       R"~([x] [x] [x] [x])~"},
      {R"~({{ 'one two  three' | wordcount }} {{ 'ab' | center(6) }}| {{ 'abc' | center(6) }}| {{ '%s=%s' | format('k', 3) }} {{ {'k': 'v'} | attr('k') }})~",
       R"~({})~",
       R"~(3   ab  |  abc  | k=3 )~"},
      {R"~({{ [1, 2] | map('string') | join('+') }} {{ ['x'] | map('replace', 'x', 'y') | first }})~",
       R"~({})~",
       R"~(1+2 y)~"},
  });
}

TEST(JinjaPythonQuirks, MatchesJinja2) {
  expect_renders({
      {R"~({{ '%s' % [1, 2] }}|{{ 'plain' % [1] }}|{{ 'plain' % {'k': 1} }}|{{ 'x%sy' % u }}|{{ '%d%%' % 50 }})~",
       R"~({})~",
       R"~([1, 2]|plain|plain|xy|50%)~"},
      {R"~({{ 2.5 is even }} {{ 3.0 is odd }} {{ 4.5 is divisibleby 1.5 }} {{ 1e20 % -1 }} {{ -7.5 // 2 }} {{ 7 % -3 }})~",
       R"~({})~",
       R"~(False True True -0.0 -4.0 -2)~"},
      {R"~({{ [3, 1, 2] | sort(attribute='missing') }} {{ [{'a': 1, 'b': 2}, {'a': 1, 'b': 1}] | sort(attribute='a,b') }})~",
       R"~({})~",
       R"~([3, 1, 2] [{'a': 1, 'b': 1}, {'a': 1, 'b': 2}])~"},
      {R"~({{ u is callable }} {{ '7' | int + 1 }} {{ ' 12 ' | int }} {{ '1_000' | int }} {{ 'nan' | float }} {{ '-inf' | float }})~",
       R"~({})~",
       R"~(True 8 12 1000 nan -inf)~"},
  });
}

TEST(JinjaToJson, MatchesJinja2) {
  expect_renders({
      {R"~({{ v | tojson }})~",
       R"~({"v": {"b": [1, 2.0, 0.1, -3, true, null, "é\"\\\n\t<>&'"], "a": {}, "c": []}})~",
       R"~({"b": [1, 2.0, 0.1, -3, true, null, "é\"\\\n\t<>&'"], "a": {}, "c": []})~"},
      {R"~({{ v | tojson(indent=2) }})~",
       R"~({"v": {"b": [1, {"x": []}], "a": "z"}})~",
       R"~({
  "b": [
    1,
    {
      "x": []
    }
  ],
  "a": "z"
})~"},
      {R"~({{ v | tojson(indent=4) | indent(4) }})~",
       R"~({"v": {"name": "f", "args": {"q": 1}}})~",
       R"~({
        "name": "f",
        "args": {
            "q": 1
        }
    })~"},
      {R"~({{ v | tojson(sort_keys=true) }} {{ v | tojson(separators=(',', ':')) }})~",
       R"~({"v": {"b": 1, "a": [1, 2]}})~",
       R"~({"a": [1, 2], "b": 1} {"b":1,"a":[1,2]})~"},
      {R"~({{ 'text' | tojson }} {{ 1.5 | tojson }} {{ 10 | tojson }} {{ none | tojson }} {{ (1, 'a') | tojson }} {{ 1e100 | tojson }})~",
       R"~({})~",
       R"~("text" 1.5 10 null [1, "a"] 1e+100)~"},
      {R"~({{ v | tojson(ensure_ascii=true) }})~",
       R"~({"v": "é😀\u0001"})~",
       R"~("\u00e9\ud83d\ude00\u0001")~"},
  });
}

TEST(JinjaTests, MatchesJinja2) {
  expect_renders({
      {R"~({{ x is defined }} {{ y is defined }} {{ y is undefined }} {{ none is none }} {{ x is not none }} {{ true is boolean }} {{ 1 is boolean }})~",
       R"~({"x": 1})~",
       R"~(True False True True True True False)~"},
      {R"~({{ 1 is integer }} {{ 1.0 is integer }} {{ 1.0 is float }} {{ 1 is number }} {{ 's' is string }} {{ 1 is string }} {{ {} is mapping }} {{ [] is mapping }})~",
       R"~({})~",
       R"~(True False True True True False True False)~"},
      {R"~({{ [] is iterable }} {{ 's' is iterable }} {{ 1 is iterable }} {{ {} is sequence }} {{ 's' is sequence }} {{ undefined_thing is iterable }} {{ range is callable }})~",
       R"~({})~",
       R"~(True True False True True True True)~"},
      {R"~({{ 4 is even }} {{ 3 is odd }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ 'ab' is lower }} {{ 'AB' is upper }} {{ 1 is eq 1 }} {{ 2 is gt 1 }} {{ 1 is in [1] }} {{ 'x' is sameas 'x' }})~",
       R"~({})~",
       R"~(True True True False True True True True True True)~"},
      {R"~({{ 'upper' is filter }} {{ 'nope' is filter }} {{ 'odd' is test }})~",
       R"~({})~",
       R"~(True False True)~"},
  });
}

TEST(JinjaMethods, MatchesJinja2) {
  expect_renders({
      {R"~({{ '  a b  '.strip() }}|{{ 'xxaxx'.lstrip('x') }}|{{ 'xxaxx'.rstrip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ '  a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'a b c'.rsplit(' ', 1) }})~",
       R"~({})~",
       R"~(a b|axx|xxa|['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']|['a b', 'c'])~"},
      {R"~({{ 'Hello'.startswith('He') }} {{ 'Hello'.endswith(('x', 'lo')) }} {{ 'ab'.upper() }} {{ 'AB'.lower() }} {{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} {{ 'aaa'.replace('a', 'b', 2) }})~",
       R"~({})~",
       R"~(True True AB ab Hello World Hello bba)~"},
      {R"~({{ 'hello'.find('l') }} {{ 'hello'.rfind('l') }} {{ 'hello'.find('z') }} {{ 'hello'.count('l') }} {{ '-'.join(['a', 'b']) }} {{ 'a\nb\r\nc'.splitlines() }} {{ '12'.isdigit() }} {{ 'ab'.isalpha() }} {{ ' '.isspace() }})~",
       R"~({})~",
       R"~(2 3 -1 2 a-b ['a', 'b', 'c'] True True True)~"},
      {R"~({{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 'dflt') }} {{ d.keys() | list }} {{ d.values() | list }} {{ d.items() | list }} {{ d.items() | length }})~",
       R"~({"d": {"a": 1, "b": 2}})~",
       R"~(1 None dflt ['a', 'b'] [1, 2] [('a', 1), ('b', 2)] 2)~"},
      {R"~({{ d.items is callable }} {{ d['items'] }})~",
       R"~({"d": {"items": "key"}})~",
       R"~(True key)~"},
      {R"~({{ content.split('</think>')[-1] }})~",
       R"~({"content": "<think>reasoning</think>Answer"})~",
       R"~(Answer)~"},
      {R"~({{ '{} and {}'.format('a', 1) }} {{ '{1}{0}{1}'.format('a', 'b') }} {{ 'x={x}'.format(x=[1]) }} {{ '{{lit}} {}'.format(5) }} {{ '{0.role}/{0[content]}'.format(m) }} [{{ '{}'.format(u) }}])~",
       R"~({"m": {"role": "user", "content": "hi"}})~",
       R"~(a and 1 bab x=[1] {lit} 5 user/hi [])~"},
      {R"~({{ [1, 2, 1].count(1) }} {{ [1, 2].index(2) }} {{ 'a.b'.removeprefix('a.') }})~",
       R"~({})~",
       R"~(2 1 b)~"},
  });
}

TEST(JinjaUndefined, MatchesJinja2) {
  expect_renders({
      {R"~({{ u }}|{{ u | upper }}|{{ u | list }}|{{ u | join(',') }}|{{ u | length }}|{% for x in u %}never{% endfor %}|{{ u is defined }}|{{ u == u2 }}|{{ u ~ 'x' }})~",
       R"~({})~",
       R"~(||[]||0||False|True|x)~"},
      {R"~({% if u %}t{% else %}f{% endif %} {% if not u %}nt{% endif %} {{ 'x' in u }} {{ u | default('dd') }})~",
       R"~({})~",
       R"~(f nt False dd)~"},
  });
}

TEST(JinjaMarkup, MatchesJinja2) {
  expect_renders({
      {R"~({{ "'" | safe + "'" + "<" }} {{ ('a' | safe) * 2 }} {{ ('<b>%s</b>' | safe) % '<i>' }} {{ ('x' | safe).split('|') }})~",
       R"~({})~",
       R"~('&#39;&lt; aa <b>&lt;i&gt;</b> [Markup('x')])~"},
      {R"~({{ [('a' | safe)] }} {{ ('<' | safe) | length }} {{ ('<' | safe ~ '<') }} {{ ('a' | safe) | replace('a', '<') }})~",
       R"~({})~",
       R"~([Markup('a')] 1 << <)~"},
  });
}

TEST(JinjaGenerators, MatchesJinja2) {
  expect_renders({
      {R"~({{ [1, 2] | select('odd') is iterable }} {{ [1, 2] | select('odd') is sequence }})~",
       R"~({})~",
       R"~(True False)~"},
      {R"~({% if [] | select('odd') %}truthy{% endif %} {{ [] | select('odd') | list | length }})~",
       R"~({})~",
       R"~(truthy 0)~"},
      {R"~({% set g = [1, 2, 3] | select('odd') %}{{ g | list }}{{ g | list }})~",
       R"~({})~",
       R"~([1, 3][])~"},
      {R"~({% set unused = 5 | items %}{% set g = [{}] | unique %}{% if g %}truthy{% endif %} {{ [1, 'a'] | select('odd') is iterable }})~",
       R"~({})~",
       R"~(truthy True)~"},
      {R"~({% set g = [1, 2, 3] | map('string') %}{{ g | first }}{{ g | first }}{{ g | list }})~",
       R"~({})~",
       R"~(12['3'])~"},
      {R"~({{ {'a': 1}.items() }} {{ {'a': 1}.keys() }} {{ {} .values() | list }} {% if {}.items() %}t{% else %}f{% endif %})~",
       R"~({})~",
       R"~(dict_items([('a', 1)]) dict_keys(['a']) [] f)~"},
  });
}

TEST(JinjaErrors, MatchJinja2Messages) {
  expect_errors({
      {R"~({{ t[::-1] }})~", R"~({"t": true})~", jinja::ErrorKind::Runtime,
       R"~('bool' object is not subscriptable)~"},  // TypeError
      {R"~({{ d[::2] }})~", R"~({"d": {"a": 1}})~", jinja::ErrorKind::Runtime,
       R"~(unhashable type: 'slice')~"},  // TypeError
      {R"~({{ x['a':] }})~", R"~({"x": [1, 2]})~", jinja::ErrorKind::Runtime,
       R"~(slice indices must be integers or None or have an __index__ method)~"},  // TypeError
      {R"~({{ u | int }})~", R"~({})~", jinja::ErrorKind::Runtime,
       R"~('u' is undefined)~"},  // UndefinedError
      {R"~({{ '%d' % u }})~", R"~({})~", jinja::ErrorKind::Runtime,
       R"~('u' is undefined)~"},  // UndefinedError
      {R"~({{ u + 'x' }})~", R"~({})~", jinja::ErrorKind::Runtime,
       R"~('u' is undefined)~"},  // UndefinedError
      {R"~({{ u.attr }})~", R"~({})~", jinja::ErrorKind::Runtime,
       R"~('u' is undefined)~"},  // UndefinedError
      {R"~({{ u['k'] }})~", R"~({})~", jinja::ErrorKind::Runtime,
       R"~('u' is undefined)~"},  // UndefinedError
      {R"~({{ {}.a.b }})~", R"~({})~", jinja::ErrorKind::Runtime,
       R"~('dict object' has no attribute 'a')~"},  // UndefinedError
      {R"~({{ none.a.b }})~", R"~({})~", jinja::ErrorKind::Runtime,
       R"~('None' has no attribute 'a')~"},  // UndefinedError
      {R"~({{ 1 + 'a' }})~", R"~({})~", jinja::ErrorKind::Runtime,
       R"~(unsupported operand type(s) for +: 'int' and 'str')~"},  // TypeError
      {R"~({{ 'a' + 1 }})~", R"~({})~", jinja::ErrorKind::Runtime,
       R"~(can only concatenate str (not "int") to str)~"},  // TypeError
      {R"~({{ 'a' < 1 }})~", R"~({})~", jinja::ErrorKind::Runtime,
       R"~('<' not supported between instances of 'str' and 'int')~"},  // TypeError
      {R"~({{ 1 / 0 }})~", R"~({})~", jinja::ErrorKind::Runtime,
       R"~(division by zero)~"},  // ZeroDivisionError
      {R"~({{ 1 // 0 }})~", R"~({})~", jinja::ErrorKind::Runtime,
       R"~(integer division or modulo by zero)~"},  // ZeroDivisionError
      {R"~({% for x in none %}{% endfor %})~", R"~({})~", jinja::ErrorKind::Runtime,
       R"~('NoneType' object is not iterable)~"},  // TypeError
      {R"~({{ 1 in none }})~", R"~({})~", jinja::ErrorKind::Runtime,
       R"~(argument of type 'NoneType' is not iterable)~"},  // TypeError
      {R"~({{ 1 in 'abc' }})~", R"~({})~", jinja::ErrorKind::Runtime,
       R"~('in <string>' requires string as left operand, not int)~"},  // TypeError
      {R"~({{ u | tojson }})~", R"~({})~", jinja::ErrorKind::Runtime,
       R"~(Object of type Undefined is not JSON serializable)~"},  // TypeError
      {R"~({{ [1] | select('odd') | tojson }})~", R"~({})~", jinja::ErrorKind::Runtime,
       R"~(Object of type generator is not JSON serializable)~"},  // TypeError
      {R"~({{ ([1] | map('string')) | length }})~", R"~({})~", jinja::ErrorKind::Runtime,
       R"~(object of type 'generator' has no len())~"},  // TypeError
      {R"~({{ 5 | items | list }})~", R"~({})~", jinja::ErrorKind::Runtime,
       R"~(Can only get item pairs from a mapping.)~"},  // TypeError
      {R"~({{ [{}] | unique | list }})~", R"~({})~", jinja::ErrorKind::Runtime,
       R"~(unhashable type: 'dict')~"},  // TypeError
      {R"~({{ raise_exception('custom message') }})~", R"~({})~", jinja::ErrorKind::Raised,
       R"~(custom message)~"},  // TemplateError
      {R"~({% macro m(a) %}{% endmacro %}{{ m(1, 2) }})~", R"~({})~", jinja::ErrorKind::Runtime,
       R"~(macro 'm' takes not more than 1 argument(s))~"},  // TypeError
      {R"~({% macro m(a) %}{% endmacro %}{{ m(b=2) }})~", R"~({})~", jinja::ErrorKind::Runtime,
       R"~(macro 'm' takes no keyword argument 'b')~"},  // TypeError
      {R"~({% set x = [1] %}{{ x.append(2) }})~", R"~({})~", jinja::ErrorKind::Runtime,
       R"~(access to attribute 'append' of 'list' object is unsafe.)~"},  // SecurityError
      {R"~({% set x = 1 %}{% set x.a = 2 %})~", R"~({})~", jinja::ErrorKind::Runtime,
       R"~(cannot assign attribute on non-namespace object)~"},  // TemplateRuntimeError
      {R"~({% set a, b = [1, 2, 3] %})~", R"~({})~", jinja::ErrorKind::Runtime,
       R"~(too many values to unpack (expected 2))~"},  // ValueError
      {R"~({{ 5 | length }})~", R"~({})~", jinja::ErrorKind::Runtime,
       R"~(object of type 'int' has no len())~"},  // TypeError
      {R"~({{ 'abc'[::0] }})~", R"~({})~", jinja::ErrorKind::Runtime,
       R"~(slice step cannot be zero)~"},  // ValueError
  });
}
// ---- hand-written: behavior beyond the reference tables ----

TEST(JinjaErrors, SyntaxErrorsNameLineAndColumn) {
  struct {
    const char* tmpl;
    uint32_t line, column;
    const char* detail_part;
  } cases[] = {
      {"{{ 1 + }}", 1, 8, "unexpected end of print statement"},
      {"ok\n{% if x %}\nno end", 3, 7, "has no {% endif %}"},
      {"{% for x in y %}{% endif %}", 1, 20, "unexpected tag 'endif'"},
      {"a\nb {{ 'unterminated }}", 2, 6, "unterminated string literal"},
      {"{# never closed", 1, 1, "missing end of comment"},
      {"{{ (1 }}", 1, 7, "unexpected '}', expected ')'"},
      {"{% break %}", 1, 4, "'break' outside of a for loop"},
      {"{% frobnicate %}", 1, 4, "unknown tag 'frobnicate'"},
      {"{{ x | }}", 1, 8, "expected a name"},
      {"{{ x.y.z(1, a=2, 3) }}", 1, 18, "positional argument follows keyword argument"},
      {"{{ a $ b }}", 1, 6, "unexpected character '$'"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.tmpl);
    const TemplateError e = error_of(c.tmpl);
    EXPECT_EQ(e.kind(), ErrorKind::Syntax) << e.what();
    EXPECT_EQ(e.pos().line, c.line) << e.what();
    EXPECT_EQ(e.pos().column, c.column) << e.what();
    EXPECT_NE(e.detail().find(c.detail_part), std::string::npos) << e.what();
  }
}

TEST(JinjaErrors, UnsupportedConstructsAreNamed) {
  struct {
    const char* tmpl;
    const char* detail_part;
  } cases[] = {
      {"{% include 'x.jinja' %}", "'{% include %}' tag is not supported"},
      {"{% extends 'base' %}", "'{% extends %}' tag is not supported"},
      {"line\n{{ x | groupby('a') }}", "unknown or unsupported filter 'groupby'"},
      {"{{ x is frobbed }}", "unknown or unsupported test 'frobbed'"},
      {"{% for x in y recursive %}{% endfor %}", "recursive for loops"},
      {"{{ f(*args) }}", "*args and **kwargs"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.tmpl);
    const TemplateError e = error_of(c.tmpl);
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
    EXPECT_NE(e.detail().find(c.detail_part), std::string::npos) << e.what();
  }
  EXPECT_EQ(error_of("line\n{{ x | groupby('a') }}").pos().line, 2u);
  EXPECT_EQ(error_of("{{ '{:>5}'.format(1) }}").kind(), ErrorKind::Unsupported);
}

TEST(JinjaErrors, RuntimeErrorsPointAtTheExpression) {
  const TemplateError e = error_of("{% for m in messages %}\n  {{ m.content + 1 }}\n{% endfor %}",
                                   R"({"messages": [{"content": "x"}]})");
  EXPECT_EQ(e.kind(), ErrorKind::Runtime);
  EXPECT_EQ(e.pos().line, 2u);
  EXPECT_EQ(e.pos().column, 16u);  // the '+'
  EXPECT_EQ(e.detail(), "can only concatenate str (not \"int\") to str");
  EXPECT_EQ(std::string(e.what()),
            "chat template error at line 2, column 16: can only concatenate str (not \"int\") to str");
}

TEST(JinjaErrors, RaiseExceptionIsDistinct) {
  const TemplateError e = error_of("{%- if true %}\n{{- raise_exception('Only user and assistant roles!') }}{% endif %}");
  EXPECT_EQ(e.kind(), ErrorKind::Raised);
  EXPECT_EQ(e.detail(), "Only user and assistant roles!");
  EXPECT_EQ(std::string(e.what()),
            "chat template raised an exception at line 2, column 5: Only user and assistant roles!");
}

TEST(JinjaLimits, RunawayTemplatesStopWithAnError) {
  // Unbounded recursion.
  EXPECT_EQ(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").kind(), ErrorKind::Limit);
  // Exponential string growth (small limits keep the test fast; the defaults are 32 MiB).
  jinja::RenderLimits small;
  small.max_string_bytes = 1 << 20;
  small.max_work = 1'000'000;
  for (const char* tmpl : {
           "{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
           "{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
           "{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = ns.s * 2 %}{% endfor %}",
           "{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = ns.s | replace('a', 'aa') %}{% endfor %}",
           "{% set ns = namespace(s=[1]) %}{% for i in range(100) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
           "{% for i in range(100000) %}{{ 'output grows past the limit' }}{% endfor %}",
       }) {
    SCOPED_TRACE(tmpl);
    EXPECT_EQ(error_of(tmpl, "{}", small).kind(), ErrorKind::Limit);
  }
  EXPECT_EQ(error_of("{{ 'x' * 100000000000 }}").kind(), ErrorKind::Limit);
  // Too much work: 100000 x 100000 loop iterations.
  small.max_work = 200'000;
  EXPECT_EQ(error_of("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "{}", small)
                .kind(),
            ErrorKind::Limit);
  // Deep nesting in the source.
  EXPECT_EQ(error_of("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}").kind(), ErrorKind::Limit);
  EXPECT_EQ(error_of("{{ " + std::string(5000, '[') + std::string(5000, ']') + " }}").kind(), ErrorKind::Limit);
  EXPECT_EQ(error_of("{{ " + std::string(5000, '-') + "1 }}").kind(), ErrorKind::Limit);
  std::string chain = "{{ 1";
  for (int i = 0; i < 5000; ++i) chain += " + 1";
  EXPECT_EQ(error_of(chain + " }}").kind(), ErrorKind::Limit);
  std::string ifs;
  for (int i = 0; i < 1000; ++i) ifs += "{% if true %}";
  EXPECT_EQ(error_of(ifs).kind(), ErrorKind::Limit);
  // Deeply nested values.
  EXPECT_EQ(error_of("{% set ns = namespace(v=[]) %}{% for i in range(1000) %}{% set ns.v = [ns.v] %}{% endfor %}")
                .kind(),
            ErrorKind::Limit);
  // A namespace holding itself renders and is torn down without leaking or looping.
  EXPECT_EQ(error_of("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}").kind(), ErrorKind::Limit);
  EXPECT_EQ(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns.me.me is defined }}"), "True");
  // Within the limits, a few hundred levels are fine.
  EXPECT_EQ(render("{{ " + std::string(40, '(') + "7" + std::string(40, ')') + " }}"), "7");
  EXPECT_EQ(render("{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% else %}done{% endif %}{% endmacro %}{{ f(100) }}"),
            "done");
}

TEST(JinjaGlobals, StrftimeNowUsesTheCallersClock) {
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y') }}"), "15 Jan 2026");
  EXPECT_EQ(render("{{ strftime_now('%Y-%m-%d %H:%M:%S %a %A %B %j %p %I %y %-d %e %%') }}"),
            "2026-01-15 00:00:00 Thu Thursday January 015 AM 12 26 15 15 %");
  EXPECT_EQ(render("{{ strftime_now is defined }}"), "True");
}

TEST(JinjaValues, CallablesAndGeneratorsPrintWithoutAddresses) {
  // Python prints "<built-in method items of dict object at 0x...>": no stable text to match.
  EXPECT_EQ(render("{{ d.items }}", R"({"d": {"items": 1}})"), "<function items>");
  EXPECT_EQ(render("{{ [1, 2] | select('odd') }}"), "<generator object>");
}

TEST(JinjaExtensions, GenerationBlockRendersItsBody) {
  // Hugging Face's AssistantTracker extension ({% generation %}) marks assistant
  // text for masks; rendering is unaffected.
  EXPECT_EQ(render("a{% generation %}b{{ 1 }}{% endgeneration %}c"), "ab1c");
}

TEST(JinjaValues, JsonInputKeepsKeyOrderAndTypes) {
  EXPECT_EQ(render("{{ v | tojson }}", R"({"v": {"z": 1, "a": [true, null, 1.0, 18446744073709551615]}})"),
            R"({"z": 1, "a": [true, null, 1.0, 1.8446744073709552e+19]})");
  EXPECT_EQ(render("{{ v }}", R"({"v": "\u00e9\ud83d\ude00"})"), "é😀");
}

TEST(JinjaValues, ArbitraryBytesInTextAndStrings) {
  const std::string bad = std::string("a\xff\xfe") + "b";
  EXPECT_EQ(render(bad + "{{ '" + bad + "' | length }}"), bad + "4");
  EXPECT_EQ(render("{{ '" + bad + "' | upper }}"), std::string("A\xff\xfe") + "B");
}

TEST(JinjaValues, StripAgreesWithForwardDecodingOnArbitraryBytes) {
  // strip() decodes only the ends, backwards on the right; it must split the
  // bytes exactly as a forward decode does, whatever they are.
  uint32_t seed = 12345;
  auto next = [&] { return seed = seed * 1664525u + 1013904223u; };
  const std::string spaces[] = {" ", "\t", "\n", "\xc2\xa0", "\xe2\x80\x83", "\xe3\x80\x80", "\x1f"};
  for (int iter = 0; iter < 2000; ++iter) {
    std::string s;
    const int n = static_cast<int>(next() % 12);
    for (int i = 0; i < n; ++i) {
      if (next() % 3 == 0) {
        s += spaces[next() % 7];
      } else {
        s.push_back(static_cast<char>(next() >> 24));
      }
    }
    size_t end = 0;  // reference: after the last non-space code point, decoding forward
    for (size_t i = 0; i < s.size();) {
      const auto d = jinja::pystr::decode(s, i);
      i += d.len;
      if (!jinja::pystr::is_space(d.cp)) end = i;
    }
    ASSERT_EQ(jinja::pystr::strip(s, std::nullopt, false, true), s.substr(0, end)) << iter;
  }
}

TEST(JinjaTemplate, ParsedTemplateRendersManyTimes) {
  const jinja::Template t = jinja::Template::parse("{% for i in range(n) %}{{ i }}{% endfor %}");
  jinja::RenderOptions options;
  EXPECT_EQ(t.render({{"n", jinja::Value(int64_t{3})}}, options), "012");
  EXPECT_EQ(t.render({{"n", jinja::Value(int64_t{5})}}, options), "01234");
}

}  // namespace
}  // namespace tokamak
