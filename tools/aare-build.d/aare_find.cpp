// aare-find: aare's own cluster finders (ClusterFinder, ClusterFinderMT) on a pedestal and a data
// .npy file, timed, for benches/peers.rs and the README's comparisons with aare. Built by
// tools/aare-build against the headers of aare's PyPI source distribution; nothing of cluda.
//
//   aare-find --pedestal P.npy --data D.npy [--cluster 3|5|7|9] [--nsigma 5]
//             [--finder mt|single] [--threads N] [--queue-depth 16] [--capacity 2048]
//             [--out FILE]
//
// The parameters are cluda find's: every pedestal frame is pushed into the pedestal, whose
// window (aare's min_pedestal_samples) is their count; n_sigma; an S x S cluster window; int32
// cluster values over a uint16 frame with a double pedestal (aare's defaults, the arithmetic of
// cluda's F64 with --threshold frozen). Both files are mapped read-only, so frames come from the
// page cache as `cluda find --device cpu` reads them (`--input map`); frames are numbered from 0.
//
// mt (default): ClusterFinderMT with --threads threads (default: every core), fed frame by frame
// from this thread, its sink drained by a second thread that counts the clusters (and writes
// them with --out). Each of aare's threads keeps its own pedestal and sees every n-th frame, so
// with more than one thread the clusters differ from a single finder's and the file's frames
// come in the sink's order. single: one ClusterFinder on this thread, clusters taken after each
// frame as ClusterFinderMT's threads take them.
//
// --out FILE: the clusters in aare's cluster file layout, written by aare's ClusterFile.
// Prints one line on stdout:
//   aare_find aare=VERSION build=portable|native finder=F threads=N cluster=S frames=N
//   clusters=N pedestal_s=X seconds=X us_per_frame=X
// seconds: from the first data frame pushed to the last cluster drained (writing included).
// Exit status 0, or 1 with a message on stderr.

#include "aare/ClusterFile.hpp"
#include "aare/ClusterFinder.hpp"
#include "aare/ClusterFinderMT.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#ifndef AARE_VERSION
#define AARE_VERSION "unknown"
#endif
#ifndef AARE_BUILD
#define AARE_BUILD "unknown"
#endif

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

// A uint16 .npy file of shape (frames, rows, cols) in C order, mapped read-only.
class Npy {
  public:
    explicit Npy(const std::string &path) : m_path(path) {
        int fd = open(path.c_str(), O_RDONLY);
        if (fd < 0)
            throw std::runtime_error(path + ": " + std::strerror(errno));
        struct stat st {};
        if (fstat(fd, &st) != 0) {
            close(fd);
            throw std::runtime_error(path + ": " + std::strerror(errno));
        }
        m_len = static_cast<size_t>(st.st_size);
        void *p = m_len ? mmap(nullptr, m_len, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
        close(fd);
        if (p == MAP_FAILED)
            throw std::runtime_error(path + ": cannot map (empty or unreadable)");
        m_base = static_cast<const uint8_t *>(p);
        parse();
    }
    Npy(const Npy &) = delete;
    Npy &operator=(const Npy &) = delete;
    ~Npy() { munmap(const_cast<uint8_t *>(m_base), m_len); }

    size_t frames() const { return m_frames; }
    ssize_t rows() const { return m_rows; }
    ssize_t cols() const { return m_cols; }

    // Frame i as aare's view (aare's finders only read it).
    aare::NDView<uint16_t, 2> frame(size_t i) const {
        const size_t px = static_cast<size_t>(m_rows) * static_cast<size_t>(m_cols);
        auto *data = reinterpret_cast<const uint16_t *>(m_base + m_offset) + i * px;
        return aare::NDView<uint16_t, 2>(const_cast<uint16_t *>(data), {m_rows, m_cols});
    }

  private:
    void fail(const std::string &why) const { throw std::runtime_error(m_path + ": " + why); }

    void parse() {
        if (m_len < 10 || std::memcmp(m_base, "\x93NUMPY", 6) != 0)
            fail("not a .npy file");
        const unsigned major = m_base[6];
        size_t hlen = 0, start = 0;
        if (major == 1) {
            hlen = m_base[8] | (m_base[9] << 8);
            start = 10;
        } else if (major == 2 || major == 3) {
            if (m_len < 12)
                fail("truncated header");
            hlen = m_base[8] | (m_base[9] << 8) | (m_base[10] << 16) |
                   (static_cast<size_t>(m_base[11]) << 24);
            start = 12;
        } else {
            fail("unknown .npy version " + std::to_string(major));
        }
        if (start + hlen > m_len)
            fail("truncated header");
        const std::string h(reinterpret_cast<const char *>(m_base + start), hlen);
        if (h.find("'descr': '<u2'") == std::string::npos)
            fail("not little-endian uint16 ('<u2')");
        if (h.find("'fortran_order': False") == std::string::npos)
            fail("not in C order");
        auto at = h.find("'shape': (");
        if (at == std::string::npos)
            fail("no shape in the header");
        std::vector<size_t> dims;
        const char *p = h.c_str() + at + 10;
        while (*p && *p != ')') {
            char *end = nullptr;
            const unsigned long long v = std::strtoull(p, &end, 10);
            if (end == p)
                break;
            dims.push_back(static_cast<size_t>(v));
            p = end;
            while (*p == ',' || *p == ' ')
                ++p;
        }
        if (dims.size() != 3 || dims[1] == 0 || dims[2] == 0 || dims[1] > 65536 ||
            dims[2] > 65536)
            fail("shape is not (frames, rows, cols) with 1 to 65536 rows and columns");
        m_offset = start + hlen;
        m_frames = dims[0];
        m_rows = static_cast<ssize_t>(dims[1]);
        m_cols = static_cast<ssize_t>(dims[2]);
        const size_t need = m_frames * dims[1] * dims[2] * 2;
        if (m_len - m_offset < need)
            fail("shorter than its shape says");
    }

    std::string m_path;
    const uint8_t *m_base = nullptr;
    size_t m_len = 0, m_offset = 0, m_frames = 0;
    ssize_t m_rows = 0, m_cols = 0;
};

struct Opts {
    std::string pedestal, data, out, finder = "mt";
    int cluster = 3;
    double nsigma = 5.0;
    size_t threads = 0, queue_depth = 16, capacity = 2048;
};

struct Result {
    size_t clusters = 0;
    double pedestal_s = 0, seconds = 0;
};

// Clusters of one frame: counted, and written when a file is open.
template <typename CT> class Sink {
  public:
    explicit Sink(const std::string &out) {
        if (!out.empty())
            m_file = std::make_unique<aare::ClusterFile<CT>>(out, 1000, "w");
    }
    void take(const aare::ClusterVector<CT> &v) {
        m_clusters += v.size();
        if (m_file)
            m_file->write_frame(v);
    }
    void close() {
        if (m_file)
            m_file->close();
    }
    size_t clusters() const { return m_clusters; }

  private:
    std::unique_ptr<aare::ClusterFile<CT>> m_file;
    size_t m_clusters = 0;
};

template <int S> Result run_single(const Opts &o, const Npy &ped, const Npy &data) {
    using CT = aare::Cluster<int32_t, S, S>;
    aare::ClusterFinder<CT, uint16_t, double> cf({ped.rows(), ped.cols()}, o.nsigma,
                                                  o.capacity, ped.frames());
    Result r;
    auto t = Clock::now();
    for (size_t i = 0; i < ped.frames(); ++i)
        cf.push_pedestal_frame(ped.frame(i));
    r.pedestal_s = since(t);
    Sink<CT> sink(o.out);
    t = Clock::now();
    for (size_t i = 0; i < data.frames(); ++i) {
        cf.find_clusters(data.frame(i), i);
        sink.take(cf.steal_clusters(true));
    }
    sink.close();
    r.seconds = since(t);
    r.clusters = sink.clusters();
    return r;
}

template <int S> Result run_mt(const Opts &o, const Npy &ped, const Npy &data) {
    using CT = aare::Cluster<int32_t, S, S>;
    aare::ClusterFinderMT<CT, uint16_t, double> cf({ped.rows(), ped.cols()}, o.nsigma,
                                                    o.capacity, o.threads, o.queue_depth,
                                                    ped.frames());
    Result r;
    auto t = Clock::now();
    for (size_t i = 0; i < ped.frames(); ++i)
        cf.push_pedestal_frame(ped.frame(i));
    // Waits for every thread's queue to empty: the pedestal is filled before the clock starts.
    if (!cf.pedestal_ready())
        throw std::runtime_error("aare's pedestal is not ready after every pedestal frame");
    r.pedestal_s = since(t);

    Sink<CT> sink(o.out);
    std::atomic<bool> fed{false};
    std::string drain_error;
    t = Clock::now();
    std::thread drain([&] {
        auto *q = cf.sink();
        try {
            for (;;) {
                if (auto *v = q->frontPtr(); v != nullptr) {
                    sink.take(*v);
                    q->popFront();
                } else if (fed.load(std::memory_order_acquire) && q->isEmpty()) {
                    break;
                } else {
                    std::this_thread::sleep_for(std::chrono::microseconds(20));
                }
            }
        } catch (const std::exception &e) {
            drain_error = e.what();
            // Keep emptying the sink so that aare's collector can finish.
            while (!fed.load(std::memory_order_acquire) || !q->isEmpty()) {
                if (q->frontPtr() != nullptr)
                    q->popFront();
                else
                    std::this_thread::sleep_for(std::chrono::microseconds(20));
            }
        }
    });
    for (size_t i = 0; i < data.frames(); ++i)
        cf.find_clusters(data.frame(i), i);
    // Joins the finder threads once their queues are empty, then the collector once every
    // cluster vector is in the sink.
    cf.stop();
    fed.store(true, std::memory_order_release);
    drain.join();
    if (!drain_error.empty())
        throw std::runtime_error(drain_error);
    sink.close();
    r.seconds = since(t);
    r.clusters = sink.clusters();
    return r;
}

template <int S> Result run(const Opts &o, const Npy &ped, const Npy &data) {
    return o.finder == "single" ? run_single<S>(o, ped, data) : run_mt<S>(o, ped, data);
}

size_t count(const std::string &flag, const std::string &v) {
    char *end = nullptr;
    const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || n == 0 || n > 1u << 20)
        throw std::runtime_error(flag + " " + v + ": want a whole number from 1 to 1048576");
    return static_cast<size_t>(n);
}

Opts parse(int argc, char **argv) {
    Opts o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            std::puts("aare-find --pedestal P.npy --data D.npy [--cluster 3|5|7|9] [--nsigma 5]\n"
                      "          [--finder mt|single] [--threads N] [--queue-depth 16]\n"
                      "          [--capacity 2048] [--out FILE]");
            std::exit(0);
        }
        if (i + 1 >= argc)
            throw std::runtime_error(a + " needs a value");
        const std::string v = argv[++i];
        if (a == "--pedestal")
            o.pedestal = v;
        else if (a == "--data")
            o.data = v;
        else if (a == "--out")
            o.out = v;
        else if (a == "--finder")
            o.finder = v;
        else if (a == "--cluster")
            o.cluster = static_cast<int>(count(a, v));
        else if (a == "--threads")
            o.threads = count(a, v);
        else if (a == "--queue-depth")
            o.queue_depth = count(a, v);
        else if (a == "--capacity")
            o.capacity = count(a, v);
        else if (a == "--nsigma") {
            char *end = nullptr;
            o.nsigma = std::strtod(v.c_str(), &end);
            if (v.empty() || *end != '\0' || !(o.nsigma >= 0) || o.nsigma > 1e300)
                throw std::runtime_error("--nsigma " + v + ": want a finite number >= 0");
        } else
            throw std::runtime_error("unknown argument " + a);
    }
    if (o.pedestal.empty() || o.data.empty())
        throw std::runtime_error("--pedestal and --data are required (see --help)");
    if (o.finder != "mt" && o.finder != "single")
        throw std::runtime_error("--finder " + o.finder + ": want mt or single");
    if (o.cluster != 3 && o.cluster != 5 && o.cluster != 7 && o.cluster != 9)
        throw std::runtime_error("--cluster " + std::to_string(o.cluster) + ": want 3, 5, 7 or 9");
    if (o.finder == "single")
        o.threads = 1;
    else if (o.threads == 0)
        o.threads = std::max(1u, std::thread::hardware_concurrency());
    return o;
}

} // namespace

int main(int argc, char **argv) {
    try {
        const Opts o = parse(argc, argv);
        const Npy ped(o.pedestal), data(o.data);
        if (ped.rows() != data.rows() || ped.cols() != data.cols())
            throw std::runtime_error("the pedestal's frames and the data's differ in shape");
        if (ped.frames() == 0)
            throw std::runtime_error(o.pedestal + ": no pedestal frames");
        Result r;
        switch (o.cluster) {
        case 3: r = run<3>(o, ped, data); break;
        case 5: r = run<5>(o, ped, data); break;
        case 7: r = run<7>(o, ped, data); break;
        default: r = run<9>(o, ped, data); break;
        }
        const double us = data.frames() ? r.seconds * 1e6 / static_cast<double>(data.frames()) : 0;
        std::printf("aare_find aare=%s build=%s finder=%s threads=%zu cluster=%d frames=%zu clusters=%zu "
                    "pedestal_s=%.6f seconds=%.6f us_per_frame=%.3f\n",
                    AARE_VERSION, AARE_BUILD, o.finder == "single" ? "ClusterFinder" : "ClusterFinderMT",
                    o.threads, o.cluster, data.frames(), r.clusters, r.pedestal_s, r.seconds, us);
        return 0;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "aare-find: %s\n", e.what());
        return 1;
    }
}
