// Chat templates against the reference renders of ../shared/fixtures/chat-templates:
// 17 real templates x 2 conversations x with/without the generation prompt,
// rendered by Jinja2 3.1.2 the way Hugging Face transformers renders them.
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <string>

#include "common/test_data.h"

namespace tokamak {
namespace {

using nlohmann::ordered_json;

constexpr int64_t k2026_01_15 = 1768435200;  // the fixtures' strftime_now clock

const ordered_json& cases_file() {
  static const ordered_json j =
      ordered_json::parse(testing::read_text_file(testing::test_data("fixtures/chat-templates/expected/cases.json")));
  return j;
}

TEST(ChatTemplateFixtures, EveryCaseRendersByteForByte) {
  const ordered_json& file = cases_file();
  const auto dir = testing::test_data("fixtures/chat-templates");
  int rendered = 0, failed_as_expected = 0;
  ASSERT_EQ(file["cases"].size(), 68u);
  for (auto it = file["cases"].begin(); it != file["cases"].end(); ++it) {
    SCOPED_TRACE(it.key());
    const ordered_json& c = it.value();
    const std::string source = testing::read_text_file(dir / c["template"].get<std::string>());
    const ChatTemplate tmpl = ChatTemplate::from_source(source, file["bos_token"], file["eos_token"]);
    ChatTemplateInputs in;
    in.messages = file["conversations"][c["conversation"].get<std::string>()];
    in.add_generation_prompt = c["add_generation_prompt"].get<bool>();
    in.now_unix_seconds = k2026_01_15;
    if (c.contains("error")) {
      // "UndefinedError: 'functions' is undefined" / "TemplateError: System role not supported"
      const std::string expected = c["error"];
      const std::string python_class = expected.substr(0, expected.find(": "));
      const std::string message = expected.substr(expected.find(": ") + 2);
      try {
        tmpl.render(in);
        ADD_FAILURE() << "rendered, but the reference raised " << expected;
      } catch (const jinja::TemplateError& e) {
        EXPECT_EQ(e.detail(), message) << e.what();
        EXPECT_EQ(e.kind(), python_class == "TemplateError" ? jinja::ErrorKind::Raised : jinja::ErrorKind::Runtime);
        EXPECT_GT(e.pos().line, 0u);
        ++failed_as_expected;
      }
      continue;
    }
    const std::string expected = testing::read_text_file(dir / c["expected"].get<std::string>());
    try {
      EXPECT_EQ(tmpl.render(in), expected);
      ++rendered;
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
  }
  EXPECT_EQ(rendered, 62);
  EXPECT_EQ(failed_as_expected, 6);
}

TEST(ChatTemplate, FallbackIsChatML) {
  const ChatTemplate t = ChatTemplate::from_source(std::nullopt, "<s>", "</s>");
  EXPECT_TRUE(t.is_chatml_fallback());
  ChatTemplateInputs in;
  in.messages = ordered_json::parse(R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}])");
  in.add_generation_prompt = true;
  EXPECT_EQ(t.render(in),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  in.add_generation_prompt = false;
  EXPECT_EQ(t.render(in), "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
  EXPECT_TRUE(ChatTemplate::from_source("", "", "").is_chatml_fallback());
  EXPECT_FALSE(ChatTemplate::from_source("{{ bos_token }}", "", "").is_chatml_fallback());
}

TEST(ChatTemplate, SyntaxErrorNamesLineAndColumn) {
  try {
    ChatTemplate::from_source("{% for m in messages %}\n  {{ m.content }\n{% endfor %}", "", "");
    FAIL() << "parsed a broken template";
  } catch (const jinja::TemplateError& e) {
    EXPECT_EQ(e.kind(), jinja::ErrorKind::Syntax);
    EXPECT_EQ(e.pos().line, 2u);
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplate, RaiseExceptionCarriesTheTemplatesMessage) {
  const ChatTemplate t = ChatTemplate::from_source(
      "{% if messages[0].role != 'user' %}{{ raise_exception('Conversation must start with a user turn') }}{% endif %}",
      "", "");
  ChatTemplateInputs in;
  in.messages = ordered_json::parse(R"([{"role":"assistant","content":"x"}])");
  try {
    t.render(in);
    FAIL() << "did not raise";
  } catch (const jinja::TemplateError& e) {
    EXPECT_EQ(e.kind(), jinja::ErrorKind::Raised);
    EXPECT_EQ(e.detail(), "Conversation must start with a user turn");
    EXPECT_EQ(std::string(e.what()),
              "chat template raised an exception at line 1, column 39: Conversation must start with a user turn");
  }
}

}  // namespace
}  // namespace tokamak
