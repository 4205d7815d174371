#include "simulator/event_queue.h"

#include <algorithm>

namespace ditune {
namespace {

// std::push_heap builds a max-heap: "less" here means "later".
struct Later {
  template <typename E>
  bool operator()(const E& a, const E& b) const {
    return a.time != b.time ? a.time > b.time : a.seq > b.seq;
  }
};

}  // namespace

void EventQueue::Push(Seconds time, int what) {
  heap_.push_back({time.value(), seq_++, what});
  std::push_heap(heap_.begin(), heap_.end(), Later{});
}

EventQueue::Event EventQueue::Pop() {
  std::pop_heap(heap_.begin(), heap_.end(), Later{});
  const Entry e = heap_.back();
  heap_.pop_back();
  return {Seconds(e.time), e.what};
}

}  // namespace ditune
