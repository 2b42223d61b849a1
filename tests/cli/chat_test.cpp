// tokamak chat end to end: a scripted conversation through stdin whose later
// turns prefill only their new tokens, Ctrl-C and Ctrl-D on a pseudo-terminal,
// and chat templates that fail.
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "common/test_data.h"
#include "io/gguf.h"
#include "tokenizer/tokenizer.h"

namespace tokamak {
namespace {

using testing::run_command;
using testing::test_data;
using testing::tokamak_bin;

std::string stories() { return test_data("models/stories260K/stories260K.gguf").string(); }

// The verbose line of each turn: "turn N: prompt P tokens (reused R, prefilled F, ...); answer A tokens (...); held H".
struct TurnLine {
  long long prompt, reused, prefilled, answer, held;
  std::string stop;
};

std::vector<TurnLine> turn_lines(const std::string& err) {
  static const std::regex line(
      R"(turn \d+: prompt (\d+) tokens \(reused (\d+), prefilled (\d+)[^)]*\); answer (\d+) tokens \([^,]*, stop: ([a-z ]+)\); held (\d+))");
  std::vector<TurnLine> out;
  for (auto it = std::sregex_iterator(err.begin(), err.end(), line); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    out.push_back({std::stoll(m[1]), std::stoll(m[2]), std::stoll(m[3]), std::stoll(m[4]), std::stoll(m[6]), m[5]});
  }
  return out;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1) {
    out.push_back(text.substr(start, nl - start));
  }
  return out;
}

std::string chatml_turn(const std::string& role, const std::string& content) {
  return "<|im_start|>" + role + "\n" + content + "<|im_end|>\n";
}

TEST(Chat, ScriptedTurnsPrefillOnlyTheirNewTokens) {
  const std::vector<std::string> questions = {"Once upon a time", "The dog ran", "Lily smiled"};
  const auto r = run_command({tokamak_bin(), "chat", "-m", stories(), "--temp", "0", "-n", "12", "-t", "2", "-v"}, {},
                             questions[0] + "\n" + questions[1] + "\n" + questions[2] + "\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<TurnLine> turns = turn_lines(r.err);
  const std::vector<std::string> answers = lines_of(r.out);
  ASSERT_EQ(turns.size(), 3u) << r.err;
  ASSERT_EQ(answers.size(), 3u) << r.out;
  EXPECT_NE(r.err.find("ChatML"), std::string::npos) << r.err;  // stories260K has no template

  // The prompts as ChatML writes them, tokenized by the model's vocabulary.
  const Tokenizer tokenizer = Tokenizer::from_gguf(io::GgufFile::open(stories()));
  const std::string first = chatml_turn("user", questions[0]) + "<|im_start|>assistant\n";
  EXPECT_EQ(turns[0].reused, 0);
  EXPECT_EQ(turns[0].prefilled, static_cast<long long>(tokenizer.encode(first, true, true).size()));
  // Turn 1 is what `tokamak run` says after the same prompt.
  const auto run = run_command({tokamak_bin(), "run", "-m", stories(), "--temp", "0", "-n", "12", "-t", "2", "-p", first});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(answers[0], run.out);

  for (size_t t = 0; t < 3; ++t) {
    SCOPED_TRACE("turn " + std::to_string(t + 1));
    EXPECT_EQ(turns[t].answer, 12);
    EXPECT_EQ(turns[t].stop, "max tokens");
    EXPECT_EQ(turns[t].prompt, turns[t].reused + turns[t].prefilled);
    EXPECT_EQ(turns[t].held, turns[t].prompt + 12);
    if (t == 0) continue;
    // Everything the session held is reused; only the previous answer's end
    // of turn and the new question are prefilled.
    EXPECT_EQ(turns[t].reused, turns[t - 1].held);
    const std::string new_text = "<|im_end|>\n" + chatml_turn("user", questions[t]) + "<|im_start|>assistant\n";
    EXPECT_EQ(turns[t].prefilled, static_cast<long long>(tokenizer.encode(new_text, false, true).size()));
  }
}

TEST(Chat, SystemMessageAndEndOfInputWithoutNewline) {
  const auto r = run_command({tokamak_bin(), "chat", "-m", stories(), "--temp", "0", "-n", "5", "-t", "1", "-v",
                              "--system", "Tell a story."},
                             {}, "Once upon a time");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<TurnLine> turns = turn_lines(r.err);
  ASSERT_EQ(turns.size(), 1u) << r.err;
  const Tokenizer tokenizer = Tokenizer::from_gguf(io::GgufFile::open(stories()));
  const std::string prompt =
      chatml_turn("system", "Tell a story.") + chatml_turn("user", "Once upon a time") + "<|im_start|>assistant\n";
  EXPECT_EQ(turns[0].prefilled, static_cast<long long>(tokenizer.encode(prompt, true, true).size()));
}

std::string write_template(const std::string& name, const std::string& text) {
  const auto path = testing::temp_file(name);
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

constexpr const char* kChatMLBody =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

// A template that raises on a turn (not on the start-up check) ends the chat
// with the error, instead of repeating it turn after turn.
TEST(Chat, ATemplateThatRaisesOnATurnEndsTheChat) {
  const std::string tmpl = write_template(
      "raises.jinja",
      std::string("{% if messages[-1].content == 'bad' %}{{ raise_exception('no bad words, ' + "
                  "strftime_now('%d %B %Y')) }}{% endif %}") +
          kChatMLBody);
  const auto r = run_command({tokamak_bin(), "chat", "-m", stories(), "--chat-template-file", tmpl, "--temp", "0",
                              "-n", "6", "-t", "1", "-v", "--jinja-date", "2026-01-15"},
                             {}, "Once upon a time\nbad\nnever reached\n");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("tokamak chat: error: " + tmpl + ": the chat template failed on turn 2: "), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("no bad words, 15 January 2026"), std::string::npos) << r.err;
  EXPECT_EQ(turn_lines(r.err).size(), 1u) << r.err;
  EXPECT_EQ(lines_of(r.out).size(), 1u) << r.out;
}

// Issue 19 finding 4: a template that rejects the system role fails at
// start-up, before any turn is read or answered.
TEST(Chat, ATemplateThatRejectsTheSystemRoleFailsAtStartUp) {
  const std::string tmpl = write_template(
      "nosystem.jinja",
      std::string("{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}") +
          kChatMLBody);
  const auto r = run_command({tokamak_bin(), "chat", "-m", stories(), "--chat-template-file", tmpl, "--system",
                              "Be brief.", "-t", "1"},
                             {}, "Hello\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("tokamak chat: error: " + tmpl + ": the chat template cannot render a first exchange with "
                        "this --system message: ", 0),
            0u)
      << r.err;
  EXPECT_NE(r.err.find("System role not supported"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  // Without --system the same template chats.
  const auto ok = run_command(
      {tokamak_bin(), "chat", "-m", stories(), "--chat-template-file", tmpl, "-n", "4", "--temp", "0", "-t", "1"}, {},
      "Hello\n");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

// Issue 19 finding 4: the ChatML fallback is announced; an answer is bounded
// by default (stories260K never ends a chat turn: without the bound one
// "Hello" ran to the 2,048-token context); a full context ends the chat
// with a message and status 1 instead of an error on every later turn.
TEST(Chat, FallbackNoticeBoundedAnswerAndFullContext) {
  const auto r = run_command({tokamak_bin(), "chat", "-m", stories(), "--temp", "0", "-t", "1", "-v"}, {}, "Hello\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("tokamak chat: note: the model has no chat template; using ChatML"), std::string::npos)
      << r.err;
  const std::vector<TurnLine> turns = turn_lines(r.err);
  ASSERT_EQ(turns.size(), 1u) << r.err;
  EXPECT_LE(turns[0].answer, 512) << r.err;

  const auto full = run_command({tokamak_bin(), "chat", "-m", stories(), "--temp", "0", "-t", "1", "-c", "48", "-n",
                                 "-1"},
                                {}, "Hello\nAgain\nAnd again\n");
  EXPECT_EQ(full.exit_code, 1) << full.err;
  EXPECT_NE(full.err.find("tokamak chat: the context of 48 tokens is full; the conversation ends here (start a new "
                          "chat, or raise -c)"),
            std::string::npos)
      << full.err;
  EXPECT_EQ(full.err.find("error"), std::string::npos) << full.err;
}

TEST(Chat, ATemplateThatDoesNotParseEndsTheChatAtStart) {
  const std::string tmpl = write_template("broken.jinja", "{% for m in messages %}{{ m.content }");
  const auto r = run_command({tokamak_bin(), "chat", "-m", stories(), "--chat-template-file", tmpl}, {}, "Hi\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("tokamak chat: error: " + tmpl + ": "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("line 1"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(Chat, ABadJinjaDateIsAnError) {
  const auto r = run_command({tokamak_bin(), "chat", "-m", stories(), "--jinja-date", "2026-02-30"}, {}, "Hi\n");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--jinja-date: '2026-02-30'"), std::string::npos) << r.err;
}

TEST(Chat, AnEditedEarlierTurnCutsTheSessionBack) {
  // This template shows only the last answer: the previous one disappears
  // from the rendering, so turn 3 keeps turn 2's prompt but not its answer.
  const std::string tmpl = write_template(
      "last_answer.jinja",
      "{% for m in messages %}{% if m.role == 'user' or loop.index0 >= messages|length - 2 %}"
      "<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endif %}{% endfor %}"
      "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}");
  const auto r = run_command({tokamak_bin(), "chat", "-m", stories(), "--chat-template-file", tmpl, "--temp", "0",
                              "-n", "6", "-t", "1", "-v"},
                             {}, "Once upon a time\nThe dog ran\nLily smiled\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<TurnLine> turns = turn_lines(r.err);
  ASSERT_EQ(turns.size(), 3u) << r.err;
  EXPECT_EQ(turns[1].reused, turns[0].held);  // turn 1's answer is still the last one
  // Turn 3: user turns 1 and 2 are rendered back to back now, so the texts
  // part after "<|im_start|>" where turn 1's answer began.
  const Tokenizer tokenizer = Tokenizer::from_gguf(io::GgufFile::open(stories()));
  const std::string kept = chatml_turn("user", "Once upon a time") + "<|im_start|>";
  EXPECT_EQ(turns[2].reused, static_cast<long long>(tokenizer.encode(kept, true, true).size()));
  EXPECT_LT(turns[2].reused, turns[1].held);
  EXPECT_EQ(turns[2].prompt, turns[2].reused + turns[2].prefilled);
}

// ------------------------------------------------------------ terminal

// tokamak on a pseudo-terminal: what it prints, and keys typed to it.
class PtyProcess {
 public:
  explicit PtyProcess(const std::vector<std::string>& argv) {
    std::vector<std::string> copy = argv;
    std::vector<char*> args;
    for (std::string& a : copy) args.push_back(a.data());
    args.push_back(nullptr);
    pid_ = forkpty(&master_, nullptr, nullptr, nullptr);
    if (pid_ == 0) {
      execv(args[0], args.data());
      _exit(127);
    }
  }
  ~PtyProcess() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (master_ >= 0) close(master_);
  }
  bool started() const { return pid_ > 0; }
  void type(const std::string& keys) { ASSERT_EQ(write(master_, keys.data(), keys.size()), (ssize_t)keys.size()); }
  // Reads until `what` appears after offset `from` of the output; false on timeout.
  bool wait_for(const std::string& what, size_t from, double seconds = 60.0) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (output_.find(what, from) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !read_some(static_cast<int>(left.count()))) return false;
    }
    return true;
  }
  // Waits for the process to end (draining its output); its exit code, or -1.
  int wait_exit(double seconds = 60.0) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        while (read_some(100)) {
        }
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      read_some(50);
    }
    return -1;
  }
  const std::string& output() const { return output_; }

 private:
  bool read_some(int timeout_ms) {
    pollfd p{master_, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) return false;
    char buf[4096];
    const ssize_t n = read(master_, buf, sizeof buf);
    if (n <= 0) return false;  // EIO once the child is gone
    output_.append(buf, static_cast<size_t>(n));
    return true;
  }

  int master_ = -1;
  pid_t pid_ = -1;
  bool exited_ = false;
  std::string output_;
};

// Answers that would run for thousands of tokens (EOS banned, big context).
std::vector<std::string> long_answers_chat() {
  return {tokamak_bin(), "chat",         "-m",  stories(), "--temp",      "0",      "-t", "1",
          "-c",          "16384",        "-n",  "16000",   "--logit-bias", "2=-inf", "-v"};
}

TEST(ChatTerminal, CtrlCStopsAnAnswerAndCtrlDExits) {
  PtyProcess p(long_answers_chat());
  ASSERT_TRUE(p.started());
  ASSERT_TRUE(p.wait_for("> ", 0)) << p.output();
  p.type("Once upon a time\n");
  size_t at = p.output().size();
  // The echo of the line, then answer text.
  ASSERT_TRUE(p.wait_for("time\r\n", 0)) << p.output();
  at = p.output().find("time\r\n") + 6;
  ASSERT_TRUE(p.wait_for(" ", at)) << p.output();
  p.type("\x03");
  ASSERT_TRUE(p.wait_for("[answer stopped]", at)) << p.output();
  ASSERT_TRUE(p.wait_for("> ", p.output().find("[answer stopped]"))) << p.output();
  // The session goes on after the stopped answer: the next turn reuses it all.
  at = p.output().size();
  p.type("The dog ran\n");
  ASSERT_TRUE(p.wait_for("ran\r\n", at)) << p.output();
  at = p.output().find("ran\r\n", at) + 5;
  ASSERT_TRUE(p.wait_for(" ", at)) << p.output();
  p.type("\x03");
  ASSERT_TRUE(p.wait_for("[answer stopped]", at)) << p.output();
  ASSERT_TRUE(p.wait_for("> ", p.output().find("[answer stopped]", at))) << p.output();
  p.type("\x04");
  EXPECT_EQ(p.wait_exit(), 0) << p.output();
  const std::vector<TurnLine> turns = turn_lines(p.output());
  ASSERT_EQ(turns.size(), 2u) << p.output();
  for (const TurnLine& t : turns) {
    EXPECT_EQ(t.stop, "interrupted");
    EXPECT_LT(t.answer, 16000);
  }
  EXPECT_EQ(turns[1].reused, turns[0].held);
}

TEST(ChatTerminal, CtrlCAtThePromptExits) {
  PtyProcess p(long_answers_chat());
  ASSERT_TRUE(p.started());
  ASSERT_TRUE(p.wait_for("> ", 0)) << p.output();
  p.type("Once upon a time\n");
  ASSERT_TRUE(p.wait_for("time\r\n", 0)) << p.output();
  const size_t at = p.output().find("time\r\n") + 6;
  ASSERT_TRUE(p.wait_for(" ", at)) << p.output();
  p.type("\x03");  // stops the answer
  ASSERT_TRUE(p.wait_for("[answer stopped]", at)) << p.output();
  ASSERT_TRUE(p.wait_for("> ", p.output().find("[answer stopped]"))) << p.output();
  p.type("\x03");  // the second one, at the prompt, ends the chat
  EXPECT_EQ(p.wait_exit(), 0) << p.output();
}

}  // namespace
}  // namespace tokamak
