#include "poseidon/timeline.h"

#include <cstdio>
#include <ctime>

namespace poseidon {

namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out;
}

}  // namespace

Timeline::Timeline(int rank) : rank_(rank), origin_(Clock::now()) {}

void Timeline::setOrigin(Clock::time_point origin) {
  std::lock_guard<std::mutex> lock(mu_);
  origin_ = origin;
  events_.clear();
  samples_.clear();
}

int Timeline::trackId(const std::string& track) {
  auto it = tracks_.find(track);
  if (it != tracks_.end()) return it->second;
  const int id = static_cast<int>(tracks_.size()) + 1;
  tracks_.emplace(track, id);
  return id;
}

void Timeline::span(const std::string& track, const std::string& name, const char* category, Clock::time_point begin,
                    Clock::time_point end) {
  std::lock_guard<std::mutex> lock(mu_);
  if (begin < origin_) return;  // start-up, before the common origin
  const double ts = std::chrono::duration<double, std::micro>(begin - origin_).count();
  const double dur = std::chrono::duration<double, std::micro>(end - begin).count();
  events_.push_back(Event{name, category, trackId(track), ts, dur, 0});
}

void Timeline::counter(const std::string& name, double value, Clock::time_point at) {
  std::lock_guard<std::mutex> lock(mu_);
  if (at < origin_) return;
  events_.push_back(
      Event{name, "bytes", -1, std::chrono::duration<double, std::micro>(at - origin_).count(), 0, value});
}

void Timeline::sample(const std::string& name, double ms) {
  std::lock_guard<std::mutex> lock(mu_);
  samples_[name].push_back(ms);
}

double Timeline::threadCpuMs() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

std::map<std::string, std::vector<double>> Timeline::durationsMs() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, std::vector<double>> out = samples_;
  for (const auto& e : events_) {
    if (e.track >= 0) out[e.name].push_back(e.dur_us / 1000.0);
  }
  return out;
}

std::string Timeline::events() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  char buf[512];
  auto add = [&](const std::string& s) {
    if (!out.empty()) out += ",\n";
    out += s;
  };
  std::snprintf(buf, sizeof(buf), R"({"ph":"M","name":"process_name","pid":%d,"args":{"name":"rank %d"}})", rank_,
                rank_);
  add(buf);
  for (const auto& [track, id] : tracks_) {
    add(std::string(R"({"ph":"M","name":"thread_name","pid":)") + std::to_string(rank_) + R"(,"tid":)" +
        std::to_string(id) + R"(,"args":{"name":")" + escape(track) + "\"}}");
    add(std::string(R"({"ph":"M","name":"thread_sort_index","pid":)") + std::to_string(rank_) + R"(,"tid":)" +
        std::to_string(id) + R"(,"args":{"sort_index":)" + std::to_string(id) + "}}");
  }
  for (const auto& e : events_) {
    if (e.track < 0) {
      std::snprintf(buf, sizeof(buf), R"({"ph":"C","name":"%s","cat":"%s","pid":%d,"ts":%.1f,"args":{"bytes":%.0f}})",
                    escape(e.name).c_str(), e.category.c_str(), rank_, e.ts_us, e.value);
    } else {
      std::snprintf(buf, sizeof(buf), R"({"ph":"X","name":"%s","cat":"%s","pid":%d,"tid":%d,"ts":%.1f,"dur":%.1f})",
                    escape(e.name).c_str(), e.category.c_str(), rank_, e.track, e.ts_us, e.dur_us);
    }
    add(buf);
  }
  return out;
}

std::string chromeTrace(const std::vector<std::string>& rank_events, const std::string& model) {
  std::string text = "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"model\":\"" + escape(model) +
                     "\",\"ranks\":" + std::to_string(rank_events.size()) + ",\"compute\":\"real\"},\"traceEvents\":[\n";
  for (std::size_t r = 0; r < rank_events.size(); ++r) text += (r ? ",\n" : "") + rank_events[r];
  return text + "\n]}\n";
}

}  // namespace poseidon
