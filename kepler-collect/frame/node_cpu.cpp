#include "frame/node_cpu.hpp"

#include "common/text_io.hpp"

namespace kepler::collect {

NodeCpuReader::NodeCpuReader(std::string proc_root) : path_(std::move(proc_root) + "/stat") {}

NodeCpuSample NodeCpuReader::read() {
    const std::string text = read_text_file_or_throw(path_, 1 << 20);
    const uint64_t read_ns = monotonic_now_ns();  // each CPU's idle clock is read while the file is made
    std::vector<CpuTicks> now = parse_proc_stat_cpus(text);
    NodeCpuSample sample = difference(previous_, now, ns_per_tick());
    if (!previous_.empty()) rescale_to_idle_clock(sample, read_ns - previous_read_ns_);
    previous_ = std::move(now);
    previous_read_ns_ = read_ns;
    return sample;
}

void NodeCpuReader::rescale_to_idle_clock(NodeCpuSample& sample, uint64_t elapsed_ns) {
    sample.busy_ns = 0;
    for (keplershm_cpu_sample& c : sample.cpus) {
        const uint64_t idle = c.idle_ns + c.iowait_ns;
        const uint64_t kernel = c.irq_ns + c.softirq_ns + c.steal_ns;
        const uint64_t busy = elapsed_ns > idle ? elapsed_ns - idle : 0;
        const uint64_t tasks = busy > kernel ? busy - kernel : 0;
        const uint64_t sampled = c.user_ns + c.nice_ns + c.system_ns;
        if (sampled == 0) {
            c.user_ns = tasks;  // no tick landed on a task: its time is still busy time
        } else {
            __extension__ typedef unsigned __int128 u128;  // ns × ns overflows 64 bits
            c.nice_ns = static_cast<uint64_t>(u128{c.nice_ns} * tasks / sampled);
            c.system_ns = static_cast<uint64_t>(u128{c.system_ns} * tasks / sampled);
            c.user_ns = tasks - c.nice_ns - c.system_ns;  // the rounding goes to user time
        }
        sample.busy_ns += c.user_ns + c.nice_ns + c.system_ns + kernel;
    }
}

NodeCpuSample NodeCpuReader::difference(const std::vector<CpuTicks>& before, const std::vector<CpuTicks>& after,
                                        uint64_t tick_ns) {
    std::map<uint32_t, const CpuTicks*> earlier;
    for (const CpuTicks& t : before) earlier[t.cpu] = &t;
    auto delta = [tick_ns](uint64_t a, uint64_t b) { return b > a ? (b - a) * tick_ns : 0; };

    NodeCpuSample sample;
    for (const CpuTicks& b : after) {
        const CpuTicks zero{b.cpu};
        const auto found = earlier.find(b.cpu);
        const CpuTicks& a = found != earlier.end() ? *found->second : zero;  // first reading: since boot
        keplershm_cpu_sample s{};
        s.cpu = b.cpu;
        s.user_ns = delta(a.user, b.user);
        s.nice_ns = delta(a.nice, b.nice);
        s.system_ns = delta(a.system, b.system);
        s.idle_ns = delta(a.idle, b.idle);
        s.iowait_ns = delta(a.iowait, b.iowait);
        s.irq_ns = delta(a.irq, b.irq);
        s.softirq_ns = delta(a.softirq, b.softirq);
        s.steal_ns = delta(a.steal, b.steal);
        sample.busy_ns += s.user_ns + s.nice_ns + s.system_ns + s.irq_ns + s.softirq_ns + s.steal_ns;
        sample.cpus.push_back(s);
    }
    return sample;
}

}  // namespace kepler::collect
