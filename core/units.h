// Unit-carrying quantities. Every value that has a unit has it in its type, so a
// bandwidth can never be passed where a latency is expected.
//   Seconds          time in seconds
//   Bytes            data size in bytes
//   Flops            floating-point operations (a count, not a rate)
//   FlopsPerSecond   compute rate
//   BytesPerSecond   bandwidth
// Decimal prefixes throughout (1 GB = 1e9 bytes), as datasheets and nccl-tests use.
#ifndef DITUNE_CORE_UNITS_H_
#define DITUNE_CORE_UNITS_H_

#include <compare>

namespace ditune {

template <typename Tag>
class Quantity {
 public:
  constexpr Quantity() = default;
  constexpr explicit Quantity(double v) : v_(v) {}
  constexpr double value() const { return v_; }

  constexpr Quantity operator+(Quantity o) const { return Quantity(v_ + o.v_); }
  constexpr Quantity operator-(Quantity o) const { return Quantity(v_ - o.v_); }
  constexpr Quantity operator*(double k) const { return Quantity(v_ * k); }
  constexpr Quantity operator/(double k) const { return Quantity(v_ / k); }
  constexpr double operator/(Quantity o) const { return v_ / o.v_; }  // a ratio
  constexpr Quantity& operator+=(Quantity o) { v_ += o.v_; return *this; }
  constexpr Quantity& operator-=(Quantity o) { v_ -= o.v_; return *this; }
  constexpr Quantity& operator*=(double k) { v_ *= k; return *this; }
  constexpr auto operator<=>(const Quantity&) const = default;

 private:
  double v_ = 0.0;
};

template <typename Tag>
constexpr Quantity<Tag> operator*(double k, Quantity<Tag> q) { return q * k; }

struct SecondsTag {};
struct BytesTag {};
struct FlopsTag {};
struct FlopsPerSecondTag {};
struct BytesPerSecondTag {};

using Seconds = Quantity<SecondsTag>;
using Bytes = Quantity<BytesTag>;
using Flops = Quantity<FlopsTag>;
using FlopsPerSecond = Quantity<FlopsPerSecondTag>;
using BytesPerSecond = Quantity<BytesPerSecondTag>;

constexpr Seconds operator/(Flops f, FlopsPerSecond r) { return Seconds(f.value() / r.value()); }
constexpr Seconds operator/(Bytes b, BytesPerSecond r) { return Seconds(b.value() / r.value()); }
constexpr BytesPerSecond operator/(Bytes b, Seconds t) { return BytesPerSecond(b.value() / t.value()); }
constexpr FlopsPerSecond operator/(Flops f, Seconds t) { return FlopsPerSecond(f.value() / t.value()); }
constexpr Bytes operator*(BytesPerSecond r, Seconds t) { return Bytes(r.value() * t.value()); }

// Constructors with the prefix in the name.
constexpr Seconds Microseconds(double us) { return Seconds(us * 1e-6); }
constexpr Seconds Milliseconds(double ms) { return Seconds(ms * 1e-3); }
constexpr Bytes Gigabytes(double gb) { return Bytes(gb * 1e9); }
constexpr Bytes Megabytes(double mb) { return Bytes(mb * 1e6); }
constexpr BytesPerSecond GigabytesPerSecond(double gbps) { return BytesPerSecond(gbps * 1e9); }
constexpr FlopsPerSecond TeraflopsPerSecond(double tf) { return FlopsPerSecond(tf * 1e12); }

}  // namespace ditune

#endif  // DITUNE_CORE_UNITS_H_
