// A POSIX shared-memory object (Boost.Interprocess shared_memory_object + mapped_region) holding one
// segment. Writers create it exclusively under a temporary name and publish it atomically under the
// real name; readers map it read-only.
#pragma once

#include <sys/types.h>

#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/shared_memory_object.hpp>

#include <cstdint>
#include <string>

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

private:
    static MappedSegment open_existing(const std::string& name, bool writable);

    boost::interprocess::shared_memory_object object_;
    boost::interprocess::mapped_region region_;
    dev_t device_ = 0;
    ino_t inode_ = 0;
    uid_t owner_ = 0;
};

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
/// Removes `name` (ignores "not found").
void unlink_segment(const std::string& name) noexcept;

}  // namespace keplershm::detail
