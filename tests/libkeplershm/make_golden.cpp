// Writes the golden files of the current layout: a segment image and a recording with golden_content.hpp's
// frames. Run once per released layout and commit the output:
//   build/bin/keplershm-make-golden tests/libkeplershm/golden/abi-<major>.<minor>  (abi-1.0, abi-1.1, ...)
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "golden_content.hpp"
#include "test_support.hpp"

int main(int argc, char** argv) {
    using namespace keplershm;
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
        return 2;
    }
    const std::filesystem::path dir = argv[1];
    std::filesystem::create_directories(dir);
    test::ScopedName name("golden");
    Writer writer(name, golden::options());
    Reader reader = Reader::open(name);
    Recorder recorder((dir / "recording.kshmrec").string());
    for (int i = 0; i < golden::kFrames; ++i) {
        Draft draft = writer.begin();
        golden::fill(draft);
        writer.commit(draft);
        FrameView view;
        if (reader.copy(draft.sequence(), view) != Status::ok) return 1;
        recorder.append(reader, view);
    }
    recorder.close();
    test::write_file_bytes((dir / "segment.bin").string(), test::read_segment_bytes(name));
    std::printf("golden files written to %s\n", dir.c_str());
    return 0;
}
