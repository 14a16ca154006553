# side_by_side.sh — sourced by the collector's cost scripts (redfish_cost.sh, gpu_cost.sh): the CPU time of
# two collectors that run at the same time, one with the feature and one without, so that whatever else
# the machine does weighs on both alike.
#
#   compare_cpu WITH_PID WITHOUT_PID SECONDS "label with" "label without"
#
# waits 5 s (start-up is not steady state), measures each one's utime+stime over SECONDS and prints both
# as % of one core, and their difference with the clock tick's resolution.
compare_cpu() {
    local with=$1 without=$2 seconds=$3 label_with=$4 label_without=$5
    ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
    sleep 5
    local w0 n0 w1 n1 hz
    w0=$(ticks "$with"); n0=$(ticks "$without")
    sleep "$seconds"
    w1=$(ticks "$with"); n1=$(ticks "$without")
    hz=$(getconf CLK_TCK)
    awk -v w="$((w1 - w0))" -v n="$((n1 - n0))" -v hz="$hz" -v s="$seconds" -v lw="$label_with" -v ln="$label_without" 'BEGIN {
        printf "collector CPU over %d s at 1 s interval, procfs (%% of one core):\n", s
        printf "  %-38s %.3f%%\n", lw ":", w / hz / s * 100
        printf "  %-38s %.3f%%\n", ln ":", n / hz / s * 100
        printf "  %-38s %.3f%% (clock tick %.0f ms: resolution %.3f%%)\n", "difference:", (w - n) / hz / s * 100, 1000 / hz, 100 / hz / s
    }'
}
