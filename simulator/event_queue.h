// The event queue under every simulation in ditune: events ordered by time, and events at
// the same time in the order they were pushed, so a run gives the same schedule every time.
// A binary heap keyed by (time, sequence): push and pop are O(log n).
#ifndef DITUNE_SIMULATOR_EVENT_QUEUE_H_
#define DITUNE_SIMULATOR_EVENT_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/units.h"

namespace ditune {

class EventQueue {
 public:
  // An event: when it happens and what it is (an id the caller gives meaning to).
  struct Event {
    Seconds time;
    int what = 0;
  };

  // Adds an event at `time` (any time; the queue does not check causality).
  void Push(Seconds time, int what);
  // Removes and returns the earliest event (among equal times, the first pushed). Requires
  // !empty().
  Event Pop();
  // The earliest event's time. Requires !empty().
  Seconds NextTime() const { return Seconds(heap_.front().time); }

  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }

 private:
  struct Entry {
    double time;
    int64_t seq;
    int what;
  };
  std::vector<Entry> heap_;
  int64_t seq_ = 0;
};

}  // namespace ditune

#endif  // DITUNE_SIMULATOR_EVENT_QUEUE_H_
