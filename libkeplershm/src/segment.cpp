#include "segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <boost/interprocess/exceptions.hpp>
#include <cerrno>
#include <cstring>

#include "error.hpp"

namespace bip = boost::interprocess;

namespace keplershm::detail {
namespace {

constexpr const char* kShmDirectory = "/dev/shm";  // where glibc's shm_open keeps objects

[[noreturn]] void fail_interprocess(const bip::interprocess_exception& e, const char* action, const std::string& name) {
    const int native = e.get_native_error();
    fail(error_from_errno(native), "cannot {} shared-memory segment '{}': {}", action, name,
         native != 0 ? std::strerror(native) : e.what());
}

void read_identity(int fd, const std::string& name, dev_t& device, ino_t& inode, uid_t& owner, off_t& size) {
    struct stat st {};
    if (fstat(fd, &st) != 0) fail(error_from_errno(errno), "cannot stat segment '{}': {}", name, std::strerror(errno));
    if (!S_ISREG(st.st_mode)) fail(KEPLERSHM_E_CORRUPT, "segment '{}' is not a regular shared-memory object", name);
    device = st.st_dev;
    inode = st.st_ino;
    owner = st.st_uid;
    size = st.st_size;
}

}  // namespace

void validate_segment_name(const std::string& name) {
    const bool length_ok = !name.empty() && name.size() <= kMaxSegmentName;
    bool chars_ok = length_ok && name.front() != '.';
    for (char c : name) {
        chars_ok = chars_ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                                c == '.' || c == '_' || c == '-');
    }
    if (!chars_ok) {
        fail(KEPLERSHM_E_INVALID_ARGUMENT,
             "segment name '{}' invalid: use 1-{} characters of [A-Za-z0-9._-], not starting with '.'", name,
             kMaxSegmentName);
    }
}

std::string segment_path(const std::string& name) { return std::string(kShmDirectory) + "/" + name; }

MappedSegment MappedSegment::create_exclusive(const std::string& name, uint64_t size, unsigned mode) {
    MappedSegment s;
    try {
        bip::permissions permissions(mode);
        // create_only → shm_open(O_CREAT|O_EXCL); glibc adds O_NOFOLLOW, so a planted symlink fails.
        s.object_ = bip::shared_memory_object(bip::create_only, name.c_str(), bip::read_write, permissions);
    } catch (const bip::interprocess_exception& e) {
        fail_interprocess(e, "create", name);
    }
    const int fd = s.object_.get_mapping_handle().handle;
    if (const int rc = posix_fallocate(fd, 0, static_cast<off_t>(size)); rc != 0) {
        unlink_segment(name);
        fail(rc == ENOSPC ? KEPLERSHM_E_NO_SPACE : error_from_errno(rc),
             "cannot reserve {} bytes for segment '{}' in {}: {}", size, name, kShmDirectory, std::strerror(rc));
    }
    try {
        s.region_ = bip::mapped_region(s.object_, bip::read_write, 0, size);
    } catch (const bip::interprocess_exception& e) {
        unlink_segment(name);
        fail_interprocess(e, "map", name);
    }
    off_t ignored = 0;
    read_identity(fd, name, s.device_, s.inode_, s.owner_, ignored);
    return s;
}

namespace {

/// A descriptor that Boost's mapped_region can map (it only asks for the handle).
class OpenedObject {
public:
    explicit OpenedObject(int fd) : fd_(fd) {}
    ~OpenedObject() { ::close(fd_); }
    OpenedObject(const OpenedObject&) = delete;
    OpenedObject& operator=(const OpenedObject&) = delete;
    [[nodiscard]] bip::mapping_handle_t get_mapping_handle() const {
        return bip::ipcdetail::mapping_handle_from_file_handle(fd_);
    }
    [[nodiscard]] int fd() const { return fd_; }

private:
    int fd_;
};

}  // namespace

MappedSegment MappedSegment::open_existing(const std::string& name, bool writable) {
    // Opened by hand rather than with shared_memory_object(open_only): O_NONBLOCK, so that a FIFO or
    // device planted at the name by another local user fails the S_ISREG check below instead of
    // blocking open() forever (glibc's shm_open adds O_NOFOLLOW and O_CLOEXEC).
    const int fd = ::shm_open(("/" + name).c_str(), (writable ? O_RDWR : O_RDONLY) | O_NONBLOCK, 0);
    if (fd < 0) {
        const int err = errno;
        fail(error_from_errno(err), "cannot open shared-memory segment '{}': {}", name, std::strerror(err));
    }
    const OpenedObject object(fd);
    MappedSegment s;
    off_t size = 0;
    read_identity(fd, name, s.device_, s.inode_, s.owner_, size);
    if (size < static_cast<off_t>(KEPLERSHM_HEADER_SIZE)) {
        fail(KEPLERSHM_E_CORRUPT, "segment '{}' has {} bytes, less than a header", name, size);
    }
    // Readers map everything; a writer only ever opens a predecessor to mark its header replaced.
    const size_t bytes = writable ? KEPLERSHM_HEADER_SIZE : static_cast<size_t>(size);
    try {
        s.region_ = bip::mapped_region(object, writable ? bip::read_write : bip::read_only, 0, bytes);
    } catch (const bip::interprocess_exception& e) {
        fail_interprocess(e, "map", name);
    }
    return s;  // the mapping outlives the descriptor
}

MappedSegment MappedSegment::open_read_only(const std::string& name) { return open_existing(name, false); }

MappedSegment MappedSegment::open_read_write(const std::string& name) { return open_existing(name, true); }

bool segment_identity(const std::string& name, dev_t& device, ino_t& inode) {
    struct stat st {};
    if (lstat(segment_path(name).c_str(), &st) != 0) return false;
    device = st.st_dev;
    inode = st.st_ino;
    return true;
}

uint64_t shm_free_bytes() {
    struct statvfs vfs {};
    if (statvfs(kShmDirectory, &vfs) != 0) fail(error_from_errno(errno), "cannot statvfs {}: {}", kShmDirectory, std::strerror(errno));
    return static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
}

void publish_segment_name(const std::string& temporary, const std::string& name, bool replace) {
    const std::string from = segment_path(temporary);
    const std::string to = segment_path(name);
    if (replace) {
        // rename(2) swaps the directory entry in one step: a reader opening the name gets the old or the
        // new segment, never nothing.
        if (::rename(from.c_str(), to.c_str()) != 0) {
            const int err = errno;
            unlink_segment(temporary);
            fail(error_from_errno(err), "cannot publish segment '{}': {}", name, std::strerror(err));
        }
        return;
    }
    // link(2) fails if the name appeared since we looked: two writers starting at once cannot both win.
    if (::link(from.c_str(), to.c_str()) != 0) {
        const int err = errno;
        unlink_segment(temporary);
        if (err == EEXIST) fail(KEPLERSHM_E_EXISTS, "segment '{}' was created by another writer meanwhile", name);
        fail(error_from_errno(err), "cannot publish segment '{}': {}", name, std::strerror(err));
    }
    unlink_segment(temporary);
}

void unlink_segment(const std::string& name) noexcept { bip::shared_memory_object::remove(name.c_str()); }

}  // namespace keplershm::detail

namespace keplershm {

void check_segment_name(const std::string& name) { detail::validate_segment_name(name); }

}  // namespace keplershm
