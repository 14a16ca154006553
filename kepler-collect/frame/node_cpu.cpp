#include "frame/node_cpu.hpp"

#include "common/text_io.hpp"

namespace kepler::collect {

NodeCpuReader::NodeCpuReader(std::string proc_root) : path_(std::move(proc_root) + "/stat") {}

NodeCpuSample NodeCpuReader::read() {
    std::vector<CpuTicks> now = parse_proc_stat_cpus(read_text_file_or_throw(path_, 1 << 20));
    NodeCpuSample sample = difference(previous_, now, ns_per_tick());
    previous_ = std::move(now);
    return sample;
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
