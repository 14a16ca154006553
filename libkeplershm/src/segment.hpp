// A POSIX shared-memory object (Boost.Interprocess shared_memory_object + mapped_region) holding one
// segment. Writers create it exclusively under a temporary name and publish it atomically under the
// real name; readers map it read-only.
#pragma once

#include <sys/types.h>

#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/shared_memory_object.hpp>

#include <cstdint>
#include <string>
#include <utility>

#include "layout.hpp"

namespace keplershm::detail {

class MappedSegment {
public:
    MappedSegment() = default;
    MappedSegment(MappedSegment&&) noexcept = default;
    MappedSegment& operator=(MappedSegment&&) noexcept = default;

    /// Creates `name` exclusively (never through a symlink) with `mode`, reserves `size` bytes with
    /// posix_fallocate (tmpfs would SIGBUS on a later write otherwise) and maps it read-write.
    static MappedSegment create_exclusive(const std::string& name, uint64_t size, unsigned mode);
    /// Maps an existing segment read-only (whole object).
    static MappedSegment open_read_only(const std::string& name);
    /// Maps an existing segment read-write (to mark a dead writer's segment replaced).
    static MappedSegment open_read_write(const std::string& name);

    [[nodiscard]] uint8_t* data() const noexcept { return static_cast<uint8_t*>(region_.get_address()); }
    [[nodiscard]] size_t size() const noexcept { return region_.get_size(); }
    [[nodiscard]] bool mapped() const noexcept { return region_.get_address() != nullptr; }
    [[nodiscard]] dev_t device() const noexcept { return device_; }
    [[nodiscard]] ino_t inode() const noexcept { return inode_; }
    [[nodiscard]] uid_t owner() const noexcept { return owner_; }
    [[nodiscard]] mode_t mode() const noexcept { return mode_; }

    /// Copies up to `size` bytes at `offset` of the object (not the mapping) with pread: a segment that
    /// its owner shrank since it was mapped gives a short count here, where a load from the mapping
    /// would raise SIGBUS. Returns the bytes copied; throws Error(IO) on a read error. Read-only opens only.
    size_t read_at(uint64_t offset, void* out, size_t size) const;

private:
    /// A descriptor closed on destruction; moves leave -1 behind.
    class Descriptor {
    public:
        Descriptor() = default;
        explicit Descriptor(int fd) noexcept : fd_(fd) {}
        Descriptor(Descriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
        Descriptor& operator=(Descriptor&& other) noexcept;
        ~Descriptor();
        [[nodiscard]] int get() const noexcept { return fd_; }

    private:
        int fd_ = -1;
    };

    static MappedSegment open_existing(const std::string& name, bool writable);

    Descriptor descriptor_;  // kept by read-only opens, for read_at
    boost::interprocess::shared_memory_object object_;
    boost::interprocess::mapped_region region_;
    dev_t device_ = 0;
    ino_t inode_ = 0;
    uid_t owner_ = 0;
    mode_t mode_ = 0;
};

/// The layout of a live segment, validated from a pread copy of its header and schema (never from the
/// mapping, which its owner may shrink under us). Throws Error on anything invalid.
Layout read_segment_layout(const MappedSegment& segment);

/// Throws Error(INVALID_ARGUMENT) unless `name` is 1–200 characters of [A-Za-z0-9._-], not starting with '.'.
void validate_segment_name(const std::string& name);
/// Path of a segment name in the shared-memory filesystem (/dev/shm/<name> on Linux/glibc).
std::string segment_path(const std::string& name);
/// Identity of the object currently under `name`; false if there is none.
bool segment_identity(const std::string& name, dev_t& device, ino_t& inode);
/// Bytes available to unprivileged users in the shared-memory filesystem.
uint64_t shm_free_bytes();
/// Atomically makes `temporary` visible as `name`. replace=false fails with EXISTS if `name` appeared.
void publish_segment_name(const std::string& temporary, const std::string& name, bool replace);
/// Removes `<name>.<16 hex digits>.tmp` objects of this user last modified over 10 s ago:
/// a writer killed between creating one and publishing it (which takes milliseconds) leaves it behind.
/// Returns how many it removed.
size_t remove_stale_temporaries(const std::string& name) noexcept;
/// Removes `name` (ignores "not found").
void unlink_segment(const std::string& name) noexcept;

}  // namespace keplershm::detail
