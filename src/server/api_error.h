// An error the HTTP API answers with, in the OpenAI shape:
//   {"error": {"message": "...", "type": "invalid_request_error", "param": "temperature", "code": null}}
// Thrown anywhere below a route handler; the handler turns it into the status
// and body. Statuses: 400 bad field or request, 401 key, 404 model or route,
// 413 body too large, 429 queue full, 503 loading or shutting down, 504 the
// request ran past --request-timeout, 500 a bug.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace tokamak::server {

class ApiError : public Error {
 public:
  ApiError(int status, std::string type, const std::string& message, std::optional<std::string> param = std::nullopt,
           std::optional<std::string> code = std::nullopt)
      : Error(message), status_(status), type_(std::move(type)), param_(std::move(param)), code_(std::move(code)) {}

  static ApiError bad_request(const std::string& message, std::optional<std::string> param = std::nullopt) {
    return ApiError(400, "invalid_request_error", message, std::move(param));
  }

  int status() const { return status_; }
  nlohmann::ordered_json to_json() const {
    const auto optional = [](const std::optional<std::string>& s) {
      return s ? nlohmann::ordered_json(*s) : nlohmann::ordered_json(nullptr);
    };
    return {{"error", {{"message", what()}, {"type", type_}, {"param", optional(param_)}, {"code", optional(code_)}}}};
  }

 private:
  int status_;
  std::string type_;
  std::optional<std::string> param_;
  std::optional<std::string> code_;
};

}  // namespace tokamak::server
