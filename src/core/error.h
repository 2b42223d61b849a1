// The one error type of the library. Messages name what was wrong and the value
// (the file, the field, the flag); the library never prints or exits on its own.
#pragma once

#include <stdexcept>
#include <string>

namespace tokamak {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tokamak
