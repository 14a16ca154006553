#include "segment.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <boost/interprocess/exceptions.hpp>
#include <cerrno>
#include <algorithm>
#include <cstring>
#include <ctime>
#include <string_view>
#include <vector>

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

void read_identity(int fd, const std::string& name, dev_t& device, ino_t& inode, uid_t& owner, mode_t& mode, off_t& size) {
    struct stat st {};
    if (fstat(fd, &st) != 0) fail(error_from_errno(errno), "cannot stat segment '{}': {}", name, std::strerror(errno));
    if (!S_ISREG(st.st_mode)) fail(KEPLERSHM_E_CORRUPT, "segment '{}' is not a regular shared-memory object", name);
    device = st.st_dev;
    inode = st.st_ino;
    owner = st.st_uid;
    mode = st.st_mode & 07777;
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
    read_identity(fd, name, s.device_, s.inode_, s.owner_, s.mode_, ignored);
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
    read_identity(fd, name, s.device_, s.inode_, s.owner_, s.mode_, size);
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
    if (!writable) s.descriptor_ = Descriptor(::fcntl(object.fd(), F_DUPFD_CLOEXEC, 0));  // for read_at
    if (!writable && s.descriptor_.get() < 0) {
        fail(error_from_errno(errno), "cannot keep a descriptor of segment '{}': {}", name, std::strerror(errno));
    }
    return s;
}

MappedSegment::Descriptor& MappedSegment::Descriptor::operator=(Descriptor&& other) noexcept {
    if (this != &other) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
}

MappedSegment::Descriptor::~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
}

size_t MappedSegment::read_at(uint64_t offset, void* out, size_t size) const {
    auto* to = static_cast<uint8_t*>(out);
    size_t done = 0;
    while (done < size) {
        const ssize_t n = ::pread(descriptor_.get(), to + done, size - done, static_cast<off_t>(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail(error_from_errno(errno), "cannot read segment at offset {}: {}", offset + done, std::strerror(errno));
        if (n == 0) break;  // the object ends here (shrunk by its owner)
        done += static_cast<size_t>(n);
    }
    return done;
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

Layout read_segment_layout(const MappedSegment& segment) {
    // Header and schema only, and never more than this: the header says where the schema is.
    constexpr uint64_t kMaxHeadBytes = 1u << 20;
    keplershm_header header{};
    uint64_t wanted = sizeof header;
    if (segment.read_at(0, &header, sizeof header) == sizeof header) {
        const uint64_t schema_end = header.schema_offset > kMaxHeadBytes
                                        ? kMaxHeadBytes
                                        : header.schema_offset + uint64_t{header.schema_count} * header.schema_entry_size;
        wanted = std::max<uint64_t>({wanted, header.header_size, schema_end});
    }
    wanted = std::min<uint64_t>({wanted, segment.size(), kMaxHeadBytes});
    std::vector<uint8_t> head(wanted);
    head.resize(segment.read_at(0, head.data(), head.size()));
    return validate_header(head.data(), head.size(), true, segment.size());
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

size_t remove_stale_temporaries(const std::string& name) noexcept {
    constexpr time_t kStaleSeconds = 10;
    DIR* directory = ::opendir(kShmDirectory);
    if (directory == nullptr) return 0;
    const std::string prefix = name + ".";
    size_t removed = 0;
    const time_t now = ::time(nullptr);
    while (const dirent* entry = ::readdir(directory)) {
        const std::string_view entry_name(entry->d_name);
        constexpr size_t kGenerationDigits = 16;
        if (entry_name.size() != prefix.size() + kGenerationDigits + 4 || !entry_name.starts_with(prefix) ||
            !entry_name.ends_with(".tmp")) {
            continue;
        }
        const std::string_view digits = entry_name.substr(prefix.size(), kGenerationDigits);
        if (digits.find_first_not_of("0123456789abcdef") != std::string_view::npos) continue;
        struct stat st {};
        if (::fstatat(::dirfd(directory), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
            st.st_uid != ::geteuid() || now - st.st_mtime < kStaleSeconds) {
            continue;
        }
        if (::unlinkat(::dirfd(directory), entry->d_name, 0) == 0) ++removed;
    }
    ::closedir(directory);
    return removed;
}

void unlink_segment(const std::string& name) noexcept { bip::shared_memory_object::remove(name.c_str()); }

}  // namespace keplershm::detail

namespace keplershm {

void check_segment_name(const std::string& name) { detail::validate_segment_name(name); }

}  // namespace keplershm
