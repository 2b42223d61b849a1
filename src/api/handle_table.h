// The C API's handles: a handle is not a pointer to the object but a slot
// number and the slot's generation, so a freed (or made-up, or foreign)
// handle is recognised on every call instead of being dereferenced:
//
//   handle bits  [63..56] kind tag   [55..32] generation   [31..0] slot + 1
//
// Freeing bumps the slot's generation, so the old handle never matches again
// (until 2^24 reuses of one slot). The table hands out shared_ptr copies: an
// object freed by one thread while another thread is inside a call stays
// alive until that call returns.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace tokamak::api {

template <class T>
class HandleTable {
 public:
  static_assert(sizeof(uintptr_t) == 8, "handles pack a slot and a generation into 64 bits");
  explicit HandleTable(uint8_t tag) : tag_(tag) {}

  uintptr_t add(std::shared_ptr<T> object) {
    const std::lock_guard lock(mu_);
    uint32_t slot;
    if (free_.empty()) {
      slot = static_cast<uint32_t>(slots_.size());
      slots_.emplace_back();
    } else {
      slot = free_.back();
      free_.pop_back();
    }
    Slot& s = slots_[slot];
    s.object = std::move(object);
    return handle(slot, s.generation);
  }

  // The object, or null when the handle is not live.
  std::shared_ptr<T> get(uintptr_t h) {
    const std::lock_guard lock(mu_);
    Slot* s = find(h);
    return s ? s->object : nullptr;
  }

  // Takes the object out (null when the handle is not live); the handle dies.
  std::shared_ptr<T> remove(uintptr_t h) {
    const std::lock_guard lock(mu_);
    Slot* s = find(h);
    if (s == nullptr) return nullptr;
    std::shared_ptr<T> object = std::move(s->object);
    s->object.reset();
    s->generation = (s->generation + 1) & kGenerationMask;
    free_.push_back(static_cast<uint32_t>(s - slots_.data()));
    return object;
  }

 private:
  static constexpr uint32_t kGenerationMask = 0xFFFFFF;
  struct Slot {
    std::shared_ptr<T> object;
    uint32_t generation = 1;
  };

  uintptr_t handle(uint32_t slot, uint32_t generation) const {
    return (uintptr_t{tag_} << 56) | (uintptr_t{generation} << 32) | (uintptr_t{slot} + 1);
  }
  Slot* find(uintptr_t h) {
    const uint32_t low = static_cast<uint32_t>(h & 0xFFFFFFFF);
    if ((h >> 56) != tag_ || low == 0 || low > slots_.size()) return nullptr;
    Slot& s = slots_[low - 1];
    if (!s.object || s.generation != ((h >> 32) & kGenerationMask)) return nullptr;
    return &s;
  }

  const uint8_t tag_;
  std::mutex mu_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;  // slots without an object
};

}  // namespace tokamak::api
