#include "sampling/param_check.h"

#include <charconv>
#include <cmath>

#include "core/error.h"

namespace tokamak::sampling {

std::string param_str(float v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

void check_param(bool ok, const std::string& field, const std::string& value, const std::string& rule) {
  if (!ok) throw Error("sampling: " + field + " = " + value + " " + rule);
}

void check_finite(const char* field, float v) { check_param(std::isfinite(v), field, param_str(v), "must be finite"); }

void check_unit_interval(const char* field, float v) {
  check_param(v >= 0.0f && v <= 1.0f, field, param_str(v), "is outside [0, 1]");  // NaN fails too
}

void check_penalties(int last_n, float repeat, float frequency, float presence) {
  check_param(last_n >= -1, "repeat_last_n", std::to_string(last_n), "must be >= -1");
  check_param(repeat > 0.0f && std::isfinite(repeat), "repeat_penalty", param_str(repeat), "must be finite and > 0");
  check_finite("frequency_penalty", frequency);
  check_finite("presence_penalty", presence);
}

void check_logit_bias(int32_t n_vocab, const std::vector<std::pair<int32_t, float>>& bias) {
  for (const auto& [token, b] : bias) {
    check_param(token >= 0 && token < n_vocab, "logit_bias token", std::to_string(token),
                "is outside [0, n_vocab = " + std::to_string(n_vocab) + ")");
    check_param(!std::isnan(b) && b != INFINITY, "logit_bias bias", param_str(b),
                "(token " + std::to_string(token) + ") must be finite or -inf");
  }
}

}  // namespace tokamak::sampling
