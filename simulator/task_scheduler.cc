#include "simulator/task_scheduler.h"

#include <algorithm>

#include <fmt/format.h>

#include "simulator/event_queue.h"

namespace ditune {

int TaskScheduler::AddStream(int rank, std::string name) {
  streams_.push_back({rank, std::move(name), {}, 0, false});
  return static_cast<int>(streams_.size()) - 1;
}

int TaskScheduler::AddResource(std::string name, int slots) {
  resources_.push_back({std::move(name), std::max(1, slots)});
  return static_cast<int>(resources_.size()) - 1;
}

int TaskScheduler::AddTask(TaskSpec task) {
  if (tasks_.size() >= max_tasks_) {
    ++dropped_;
    return static_cast<int>(tasks_.size());  // never scheduled: Run refuses the graph
  }
  const int id = static_cast<int>(tasks_.size());
  if (task.stream >= 0 && task.stream < static_cast<int>(streams_.size())) {
    streams_[task.stream].tasks.push_back(id);
  }
  tasks_.push_back(std::move(task));
  return id;
}

void TaskScheduler::Clear() {
  streams_.clear();
  resources_.clear();
  tasks_.clear();
  start_.clear();
  end_.clear();
  last_dep_.clear();
  makespan_ = Seconds(0);
  dropped_ = 0;
}

Status TaskScheduler::Run() {
  if (dropped_ > 0) {
    return Status::InvalidArgument(
        fmt::format("the schedule has {} tasks, more than the {} a simulation holds", tasks_.size() + dropped_, max_tasks_));
  }
  const int n = num_tasks();
  start_.assign(n, Seconds(0));
  end_.assign(n, Seconds(0));
  last_dep_.assign(n, -1);
  std::vector<int> pending(n, 0);
  std::vector<Seconds> ready_at(n, Seconds(0));
  // Each task's dependents, in one array: those of task d at [first_dependent[d], [d + 1]).
  std::vector<int> first_dependent(n + 1, 0);
  for (int i = 0; i < n; ++i) {
    const TaskSpec& t = tasks_[i];
    if (t.stream < 0 || t.stream >= num_streams()) {
      return Status::Internal(fmt::format("task {} '{}' names stream {}", i, t.name, t.stream));
    }
    if (t.resource >= static_cast<int>(resources_.size())) {
      return Status::Internal(fmt::format("task {} '{}' names resource {}", i, t.name, t.resource));
    }
    for (int d : t.deps) {
      if (d < 0 || d >= i) {
        return Status::Internal(fmt::format("task {} '{}' depends on {}, not an earlier task", i, t.name, d));
      }
      ++first_dependent[d + 1];
      ++pending[i];
    }
  }
  for (int i = 0; i < n; ++i) first_dependent[i + 1] += first_dependent[i];
  std::vector<int> dependents(first_dependent[n]);
  {
    std::vector<int> filled(first_dependent.begin(), first_dependent.end() - 1);
    for (int i = 0; i < n; ++i) {
      for (int d : tasks_[i].deps) dependents[filled[d]++] = i;
    }
  }
  for (auto& s : streams_) {
    s.next = 0;
    s.busy = false;
  }

  // Completion events: the task that ends.
  EventQueue events;
  // Tasks waiting for a resource slot, per resource: (ready time, task).
  std::vector<std::vector<std::pair<double, int>>> waiting(resources_.size());
  int done = 0;
  Seconds now(0);

  auto start_task = [&](int id, Seconds at) {
    start_[id] = at;
    end_[id] = at + tasks_[id].duration;
    streams_[tasks_[id].stream].busy = true;
    events.Push(end_[id], id);
  };
  // Starts the head task of `s` if it is ready; a task that needs a busy resource waits.
  auto try_stream = [&](int s, Seconds at) {
    Stream& st = streams_[s];
    if (st.busy || st.next >= st.tasks.size()) return;
    const int id = st.tasks[st.next];
    if (pending[id] > 0) return;
    const Seconds t = std::max(at, ready_at[id]);
    const int r = tasks_[id].resource;
    if (r >= 0) {
      if (resources_[r].free == 0) {
        auto& w = waiting[r];
        if (std::find_if(w.begin(), w.end(), [&](const auto& p) { return p.second == id; }) == w.end()) {
          w.emplace_back(t.value(), id);
        }
        return;
      }
      --resources_[r].free;
    }
    ++st.next;
    start_task(id, t);
  };

  for (int s = 0; s < num_streams(); ++s) try_stream(s, now);
  std::vector<int> touched;  // streams whose head task may have become ready
  while (!events.empty()) {
    const EventQueue::Event ev = events.Pop();
    const int id = ev.what;
    now = ev.time;
    ++done;
    const TaskSpec& t = tasks_[id];
    streams_[t.stream].busy = false;
    touched.assign(1, t.stream);
    if (t.resource >= 0) {
      ++resources_[t.resource].free;
      auto& w = waiting[t.resource];
      if (!w.empty()) {
        // The earliest-ready waiter (ties: lowest id) gets the slot.
        auto it = std::min_element(w.begin(), w.end());
        const int next = it->second;
        w.erase(it);
        --resources_[t.resource].free;
        Stream& st = streams_[tasks_[next].stream];
        ++st.next;
        start_task(next, std::max(now, ready_at[next]));
      }
    }
    for (int j = first_dependent[id]; j < first_dependent[id + 1]; ++j) {
      const int d = dependents[j];
      if (end_[id] >= ready_at[d]) {
        ready_at[d] = end_[id];
        last_dep_[d] = id;
      }
      if (--pending[d] == 0) touched.push_back(tasks_[d].stream);
    }
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (int s : touched) try_stream(s, now);
  }
  if (done != n) {
    return Status::Internal(fmt::format("{} of {} tasks never ran: a dependency cycle or a stream order "
                                        "that contradicts the dependencies",
                                        n - done, n));
  }
  makespan_ = Seconds(0);
  for (int i = 0; i < n; ++i) makespan_ = std::max(makespan_, end_[i]);
  return Status::Ok();
}

}  // namespace ditune
