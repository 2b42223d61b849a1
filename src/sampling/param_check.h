// Parameter checks shared by validate() and the sampler factories, so that each
// rule is written once and every message reads "sampling: <field> = <value> <rule>".
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tokamak::sampling {

// Shortest decimal that reads back as v (inf, nan spelled out).
std::string param_str(float v);
// Throws Error("sampling: " + field + " = " + value + " " + rule) unless ok.
void check_param(bool ok, const std::string& field, const std::string& value, const std::string& rule);

void check_finite(const char* field, float v);
void check_unit_interval(const char* field, float v);  // v in [0, 1]
void check_penalties(int last_n, float repeat, float frequency, float presence);
void check_logit_bias(int32_t n_vocab, const std::vector<std::pair<int32_t, float>>& bias);

}  // namespace tokamak::sampling
