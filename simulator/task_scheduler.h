// The scheduler of per-rank task graphs: a discrete-event simulation on the EventQueue.
//
// Streams execute their tasks one at a time in submission order (like CUDA streams). A
// task starts when every dependency has finished, its stream has finished the task before
// it, and, if it names a resource (a shared link), one of the resource's slots is free.
// Completions are processed from an EventQueue (a heap keyed by (time, sequence)), so equal
// times resolve in submission order and every run gives the same schedule.
#ifndef DITUNE_SIMULATOR_TASK_SCHEDULER_H_
#define DITUNE_SIMULATOR_TASK_SCHEDULER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/units.h"

namespace ditune {

// What a task's time is spent on, for breakdowns and traces.
enum class TaskKind { kCompute, kComm, kTextEncode, kVaeDecode, kHost };

struct TaskSpec {
  int stream = 0;
  Seconds duration;
  // Of `duration`, the part that is synchronous communication inside a compute task (a
  // Ulysses all-to-all the kernels wait for); the rest is compute.
  Seconds comm_part;
  std::vector<int> deps;  // task ids that must finish first
  int resource = -1;      // a shared resource id, or -1
  TaskKind kind = TaskKind::kCompute;
  std::string_view name;  // static text (a literal): tasks are many, their names few
  int step = -1;          // denoising step, -1 outside the loop
};

class TaskScheduler {
 public:
  // A stream of rank `rank`; `name` labels it in traces ("compute", "comm").
  int AddStream(int rank, std::string name);
  // A resource with `slots` concurrent users (>= 1).
  int AddResource(std::string name, int slots);
  // Returns the task's id. Dependencies must name earlier tasks.
  int AddTask(TaskSpec task);
  // Forgets every stream, resource and task (a new graph in the same scheduler).
  void Clear();
  // At most `n` tasks are kept: AddTask beyond them stores nothing (the graph's memory stays
  // bounded) and Run refuses the graph (InvalidArgument, naming the limit).
  void set_max_tasks(size_t n) { max_tasks_ = n; }
  // Tasks AddTask was given beyond max_tasks.
  size_t dropped_tasks() const { return dropped_; }

  // Schedules every task. Fails (Internal) on a dependency cycle or a bad id.
  Status Run();

  Seconds start(int task) const { return start_[task]; }
  Seconds end(int task) const { return end_[task]; }
  const TaskSpec& task(int id) const { return tasks_[id]; }
  int num_tasks() const { return static_cast<int>(tasks_.size()); }
  int stream_rank(int stream) const { return streams_[stream].rank; }
  const std::string& stream_name(int stream) const { return streams_[stream].name; }
  int num_streams() const { return static_cast<int>(streams_.size()); }
  Seconds makespan() const { return makespan_; }
  // The dependency that finished last before `task` started (-1 when none held it back).
  int last_dep(int task) const { return last_dep_[task]; }

 private:
  struct Stream {
    int rank = 0;
    std::string name;
    std::vector<int> tasks;  // in submission order
    size_t next = 0;         // first task not yet started
    bool busy = false;
  };
  struct Resource {
    std::string name;
    int free = 1;
  };

  std::vector<Stream> streams_;
  std::vector<Resource> resources_;
  std::vector<TaskSpec> tasks_;
  std::vector<Seconds> start_, end_;
  std::vector<int> last_dep_;
  Seconds makespan_;
  size_t max_tasks_ = static_cast<size_t>(-1);
  size_t dropped_ = 0;
};

}  // namespace ditune

#endif  // DITUNE_SIMULATOR_TASK_SCHEDULER_H_
