// Native Verilator harness for the specmem AXI4-Stream tops (annihilation, VLA).
//
// Built by specmem.sim.native (verilator --cc --exe --build) with a generated "harness_config.h"
// that names the top class, the lane widths, the beats per token and the status ports. The
// Python driver writes the input tokens and a segment schedule, runs this program and compares
// what it writes with the fixed-point golden model; this program checks no numbers itself, only
// the protocol (tlast on the right beats, no output where none can be, a watchdog).
//
// Stream semantics (the cocotb driver's, cocotbext-axi's AxiStreamSource/Sink):
//  * the source presents a beat (tvalid high) and holds it, data unchanged, until the edge at
//    which tready is high; only when it holds no beat may it pause: with probability `idle` per
//    cycle it presents nothing (an idle gap);
//  * the sink drives tready low with probability `stall` per cycle (backpressure);
//  * a transfer happens at a rising edge where tvalid and tready were both high before the edge.
// Both random streams come from one seeded generator (splitmix64), so a run is reproducible.
//
// Segments: the input file is a sequence of segments (schedule file: one line per segment,
// "<tokens> <kind> <param>"). Each segment starts with a synchronous reset (rst high for two
// cycles, then one cycle, then `clear_cycles` cycles while the core clears its state; the source
// presents nothing meanwhile) and sends its tokens. How it ends, by kind:
//   0 drain     : wait until every output token came out, status_tokens equals the segment's
//                 tokens and status_busy is low; the counters are then recorded (all checked);
//   1 in_token  : reset right after the edge that accepted beat `param` (1..beats-1) of the
//                 segment's last token (a reset inside a token's beats);
//   2 between   : reset right after the edge that accepted the segment's last input beat
//                 (outputs still pending);
//   3 in_output : once every input beat is in, reset right after the first edge that
//                 transferred an output beat other than the last of its token (or any output
//                 beat where a token is one beat).
// Cut segments (1-3) record the counters right before the reset; the outputs that came out
// before it must be a prefix of the golden model's outputs for the segment.
//
// Files written to the output folder:
//   y.bin       output elements, every whole output token in order (OUT_BYTES each, signed);
//   user.bin    (tops with m_axis_tuser) tuser of every beat of those tokens (int32);
//   status.bin  per planned input token, int64[N_STATUS]: the status ports sampled right after
//               the edge at which status_tokens counted that token (-1 where it never did);
//   summary.json  cycles, simulation seconds, per-segment records, protocol errors.
// Exit status: 0 after a complete run (numbers unchecked), 3 on a watchdog timeout, 2 on bad
// arguments or unreadable files.

#include "harness_config.h"

#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "verilated.h"

namespace {

// ---------------------------------------------------------------------------------------------
// random numbers

struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ULL + 0x2545F4914F6CDD1DULL) {}
    uint64_t next() {
        uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        return z ^ (z >> 31);
    }
    // true with probability p (p given as a 53-bit threshold, see threshold())
    bool chance(uint64_t thr) { return thr && (next() >> 11) < thr; }
};

uint64_t threshold(double p) {
    if (p <= 0) return 0;
    if (p >= 1) return 1ULL << 53;
    return static_cast<uint64_t>(p * 9007199254740992.0);
}

// ---------------------------------------------------------------------------------------------
// lanes <-> ports (ports up to 64 bits are integers, wider ones VlWide word arrays)

inline void put_bits(uint32_t* w, int bit, int width, uint32_t v) {
    uint64_t x = static_cast<uint64_t>(v & (width >= 32 ? 0xFFFFFFFFu : ((1u << width) - 1))) << (bit % 32);
    w[bit / 32] |= static_cast<uint32_t>(x);
    if ((bit % 32) + width > 32) w[bit / 32 + 1] |= static_cast<uint32_t>(x >> 32);
}

inline int32_t get_bits(const uint32_t* w, int bit, int width) {
    uint64_t x = w[bit / 32];
    if ((bit % 32) + width > 32) x |= static_cast<uint64_t>(w[bit / 32 + 1]) << 32;
    uint32_t v = static_cast<uint32_t>(x >> (bit % 32)) & (width >= 32 ? 0xFFFFFFFFu : ((1u << width) - 1));
    if (width < 32 && (v >> (width - 1)) & 1) v |= ~((1u << width) - 1);  // sign-extend
    return static_cast<int32_t>(v);
}

// CPU time of the process (all threads): the speed on a shared machine, where wall time is
// stretched by the other jobs
double cpu_seconds() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

constexpr int words_for(int bits) { return (bits + 31) / 32 + 1; }

template <typename T>
void set_port(T& port, const uint32_t* w) {
    if constexpr (VlIsVlWide<T>::value) {
        for (size_t i = 0; i < T::Words; ++i) port.at(i) = w[i];
    } else {
        port = static_cast<T>(static_cast<uint64_t>(w[0]) | (static_cast<uint64_t>(w[1]) << 32));
    }
}

template <typename T>
void get_port(const T& port, uint32_t* w, int nwords) {
    for (int i = 0; i < nwords; ++i) w[i] = 0;
    if constexpr (VlIsVlWide<T>::value) {
        for (size_t i = 0; i < T::Words; ++i) w[i] = port.at(i);
    } else {
        uint64_t v = static_cast<uint64_t>(port);
        w[0] = static_cast<uint32_t>(v);
        w[1] = static_cast<uint32_t>(v >> 32);
    }
}

// ---------------------------------------------------------------------------------------------

struct Segment {
    long start = 0, planned = 0;
    int kind = 0, param = 0;
    long accepted = 0;       // whole input tokens accepted
    long beats_in = 0;       // input beats accepted
    long outputs = 0;        // whole output tokens received
    long out_start = 0;      // index of its first output token in y.bin
    uint64_t c0 = 0, c1 = 0;  // cycles: first cycle after the clear, the end (reset or drained)
    bool timeout = false;
    int64_t counters[N_STATUS] = {};
};

struct Args {
    std::string in, schedule, out;
    uint64_t seed = 0;
    double idle = 0.0, stall = 0.0;
    long clear_cycles = 0, watchdog = 100000;
    int in_bytes = 1, out_bytes = 2;
};

[[noreturn]] void die(const std::string& msg) {
    std::fprintf(stderr, "specmem-native: error: %s\n", msg.c_str());
    std::exit(2);
}

Args parse(int argc, char** argv) {
    Args a;
    for (int i = 1; i < argc; ++i) {
        std::string k = argv[i];
        if (k.rfind("+verilator", 0) == 0) continue;
        if (i + 1 >= argc) die("option " + k + " needs a value");
        std::string v = argv[++i];
        if (k == "--in") a.in = v;
        else if (k == "--schedule") a.schedule = v;
        else if (k == "--out") a.out = v;
        else if (k == "--seed") a.seed = std::strtoull(v.c_str(), nullptr, 10);
        else if (k == "--idle") a.idle = std::atof(v.c_str());
        else if (k == "--stall") a.stall = std::atof(v.c_str());
        else if (k == "--clear-cycles") a.clear_cycles = std::atol(v.c_str());
        else if (k == "--watchdog") a.watchdog = std::atol(v.c_str());
        else if (k == "--in-bytes") a.in_bytes = std::atoi(v.c_str());
        else if (k == "--out-bytes") a.out_bytes = std::atoi(v.c_str());
        else die("unknown option " + k);
    }
    if (a.in.empty() || a.schedule.empty() || a.out.empty()) die("--in, --schedule and --out are required");
    for (int b : {a.in_bytes, a.out_bytes})
        if (b != 1 && b != 2 && b != 4) die("--in-bytes/--out-bytes: 1, 2 or 4");
    return a;
}

class Harness {
  public:
    Harness(const Args& a) : args(a), rng(a.seed), idle_thr(threshold(a.idle)), stall_thr(threshold(a.stall)) {
        ctx = std::make_unique<VerilatedContext>();
        top = std::make_unique<TOP_CLASS>(ctx.get());
        top->clk = 0;
        top->rst = 1;
        top->s_axis_tvalid = 0;
        top->s_axis_tlast = 0;
        top->m_axis_tready = 0;
        top->eval();
        tok.resize(static_cast<size_t>(IN_ELEMS));
        out_tok.resize(static_cast<size_t>(OUT_ELEMS));
        out_user.resize(OUT_BEATS);
    }

    ~Harness() { top->final(); }

    // one clock cycle: inputs as set, settle, sample the handshakes, rising edge
    inline void cycle() {
        top->eval();
        in_x = top->s_axis_tvalid && top->s_axis_tready;
        out_x = top->m_axis_tvalid && top->m_axis_tready;
        if (out_x) {
            get_port(top->m_axis_tdata, out_words, words_for(OUT_LANES_BITS));
            out_last = top->m_axis_tlast;
#if USER_W > 0
            out_user_now = static_cast<int32_t>(top->m_axis_tuser);
#endif
        }
        top->clk = 1;
        top->eval();
        top->clk = 0;
        ++cycles;
    }

    std::unique_ptr<VerilatedContext> ctx;
    std::unique_ptr<TOP_CLASS> top;
    Args args;
    Rng rng;
    uint64_t idle_thr, stall_thr;
    uint64_t cycles = 0;
    bool in_x = false, out_x = false, out_last = false;
    uint32_t out_words[words_for(OUT_LANES_BITS)] = {};
    int32_t out_user_now = 0;
    std::vector<int32_t> tok, out_tok, out_user;
};

template <typename T>
void write_elems(FILE* f, const int32_t* v, size_t n) {
    static std::vector<T> buf;
    buf.resize(n);
    for (size_t i = 0; i < n; ++i) buf[i] = static_cast<T>(v[i]);
    std::fwrite(buf.data(), sizeof(T), n, f);
}

bool read_token(FILE* f, int bytes, int32_t* dst, size_t n) {
    static std::vector<uint8_t> buf;
    buf.resize(n * bytes);
    if (std::fread(buf.data(), 1, buf.size(), f) != buf.size()) return false;
    for (size_t i = 0; i < n; ++i) {
        if (bytes == 1) dst[i] = static_cast<int8_t>(buf[i]);
        else if (bytes == 2) { int16_t v; std::memcpy(&v, &buf[2 * i], 2); dst[i] = v; }
        else { int32_t v; std::memcpy(&v, &buf[4 * i], 4); dst[i] = v; }
    }
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    Verilated::commandArgs(argc, argv);
    Args args = parse(argc, argv);

    std::vector<Segment> segs;
    {
        FILE* f = std::fopen(args.schedule.c_str(), "r");
        if (!f) die("cannot read the schedule " + args.schedule);
        long n;
        int kind, param;
        long start = 0;
        while (std::fscanf(f, "%ld %d %d", &n, &kind, &param) == 3) {
            Segment s;
            s.start = start;
            s.planned = n;
            s.kind = kind;
            s.param = param;
            segs.push_back(s);
            start += n;
        }
        std::fclose(f);
        if (segs.empty()) die("the schedule " + args.schedule + " names no segment");
    }
    long total_planned = segs.back().start + segs.back().planned;

    FILE* fin = std::fopen(args.in.c_str(), "rb");
    if (!fin) die("cannot read the input tokens " + args.in);
    std::string od = args.out + "/";
    FILE* fy = std::fopen((od + "y.bin").c_str(), "wb");
    FILE* fs = std::fopen((od + "status.bin").c_str(), "wb");
    FILE* fu = USER_W > 0 ? std::fopen((od + "user.bin").c_str(), "wb") : nullptr;
    if (!fy || !fs || (USER_W > 0 && !fu)) die("cannot write into " + args.out);

    Harness h(args);
    auto* top = h.top.get();
    std::vector<std::string> errors;
    long tlast_errors = 0, early_outputs = 0, total_out = 0;
    bool aborted = false;
    std::vector<int64_t> status_rows;
    const int64_t in_beats = IN_BEATS, out_beats = OUT_BEATS;

    auto t0 = std::chrono::steady_clock::now();
    const double cpu0 = cpu_seconds();
    for (size_t si = 0; si < segs.size() && !aborted; ++si) {
        Segment& sg = segs[si];
        // reset: two cycles high, one low, then the clear; the source presents nothing
        top->s_axis_tvalid = 0;
        top->s_axis_tlast = 0;
        top->rst = 1;
        for (int i = 0; i < 2; ++i) {
            top->m_axis_tready = !h.rng.chance(h.stall_thr);
            h.cycle();
        }
        top->rst = 0;
        for (long i = 0; i < 1 + args.clear_cycles; ++i) {
            top->m_axis_tready = !h.rng.chance(h.stall_thr);
            h.cycle();
            if (h.out_x) ++early_outputs;
        }
        if (std::fseek(fin, static_cast<long>(sg.start) * IN_ELEMS * args.in_bytes, SEEK_SET) != 0)
            die("cannot seek in the input tokens");
        sg.c0 = h.cycles;
        sg.out_start = total_out;
        status_rows.assign(static_cast<size_t>(sg.planned) * N_STATUS, -1);
        const int64_t total_beats = sg.planned * in_beats;
        int64_t beat = 0;      // input beats accepted
        bool holding = false;  // a beat is presented
        int64_t out_beat = 0;  // beats of the current output token
        uint32_t prev_tokens = 0;
        uint64_t last_progress = h.cycles;
        uint32_t in_words[words_for(IN_LANES_BITS)];
        bool cut = false;
        for (;;) {
            // source
            if (!holding && beat < total_beats && !h.rng.chance(h.idle_thr)) {
                int64_t b = beat % in_beats;
                if (b == 0 && !read_token(fin, args.in_bytes, h.tok.data(), IN_ELEMS)) {
                    errors.push_back("the input file ends before token " + std::to_string(sg.start + beat / in_beats));
                    aborted = true;
                    break;
                }
                std::memset(in_words, 0, sizeof in_words);
                for (int l = 0; l < K_LANES; ++l)
                    put_bits(in_words, l * IN_W, IN_W, static_cast<uint32_t>(h.tok[b * K_LANES + l]));
                set_port(top->s_axis_tdata, in_words);
                top->s_axis_tlast = (b == in_beats - 1);
                top->s_axis_tvalid = 1;
                holding = true;
            } else if (!holding) {
                top->s_axis_tvalid = 0;
            }
            // sink
            top->m_axis_tready = !h.rng.chance(h.stall_thr);
            h.cycle();
            bool progress = false;
            if (h.in_x) {
                holding = false;
                ++beat;
                progress = true;
                top->s_axis_tvalid = 0;
            }
            bool mid_output = false;
            if (h.out_x) {
                progress = true;
                for (int l = 0; l < K_LANES; ++l)
                    h.out_tok[out_beat * K_LANES + l] = get_bits(h.out_words, l * OUT_W, OUT_W);
                h.out_user[out_beat] = h.out_user_now;
                bool last = out_beat == out_beats - 1;
                if (h.out_last != last) {
                    if (tlast_errors < 5)
                        errors.push_back("output token " + std::to_string(total_out) + " beat " +
                                         std::to_string(out_beat) + ": m_axis_tlast " + (h.out_last ? "1" : "0") +
                                         " (expected on beat " + std::to_string(out_beats - 1) + " only)");
                    ++tlast_errors;
                }
                mid_output = !last || out_beats == 1;
                if (last) {
                    if (args.out_bytes == 1) write_elems<int8_t>(fy, h.out_tok.data(), OUT_ELEMS);
                    else if (args.out_bytes == 2) write_elems<int16_t>(fy, h.out_tok.data(), OUT_ELEMS);
                    else write_elems<int32_t>(fy, h.out_tok.data(), OUT_ELEMS);
                    if (fu) std::fwrite(h.out_user.data(), sizeof(int32_t), OUT_BEATS, fu);
                    ++sg.outputs;
                    ++total_out;
                    out_beat = 0;
                } else {
                    ++out_beat;
                }
            }
            uint32_t st = static_cast<uint32_t>(top->status_tokens);
            if (st != prev_tokens) {
                progress = true;
                prev_tokens = st;
                if (st >= 1 && st <= static_cast<uint32_t>(sg.planned)) {
                    int64_t row[N_STATUS];
                    READ_STATUS(top, row);
                    std::memcpy(&status_rows[(st - 1) * N_STATUS], row, sizeof row);
                }
            }
            if (progress) last_progress = h.cycles;
            // the segment's end
            bool all_in = beat == total_beats;
            if (sg.kind == 1 && in_beats > 1 && beat == (sg.planned - 1) * in_beats + sg.param) cut = true;
            else if ((sg.kind == 2 || (sg.kind == 1 && in_beats == 1)) && all_in) cut = true;
            else if (sg.kind == 3 && all_in && h.out_x && mid_output) cut = true;
            if (cut) break;
            if (sg.kind == 0 && all_in && sg.outputs == sg.planned && st == sg.planned && !top->status_busy) break;
            if (h.cycles - last_progress > static_cast<uint64_t>(args.watchdog)) {
                sg.timeout = true;
                errors.push_back("timeout: segment " + std::to_string(si) + " made no progress for " +
                                 std::to_string(args.watchdog) + " cycles (" + std::to_string(beat) + " of " +
                                 std::to_string(total_beats) + " input beats, " + std::to_string(sg.outputs) +
                                 " output tokens, status_tokens " + std::to_string(st) + ")");
                aborted = true;
                break;
            }
        }
        sg.beats_in = beat;
        sg.accepted = beat / in_beats;
        sg.c1 = h.cycles;
        READ_STATUS(top, sg.counters);
        std::fwrite(status_rows.data(), sizeof(int64_t), status_rows.size(), fs);
        if (aborted) {
            for (size_t j = si + 1; j < segs.size(); ++j) {  // keep status.bin one row per planned token
                status_rows.assign(static_cast<size_t>(segs[j].planned) * N_STATUS, -1);
                std::fwrite(status_rows.data(), sizeof(int64_t), status_rows.size(), fs);
            }
        }
    }
    double sim_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double cpu_s = cpu_seconds() - cpu0;
    std::fclose(fin);
    std::fclose(fy);
    std::fclose(fs);
    if (fu) std::fclose(fu);
    if (early_outputs)
        errors.push_back(std::to_string(early_outputs) + " output beats during a reset's clear (no token was in)");

    FILE* fj = std::fopen((od + "summary.json").c_str(), "w");
    if (!fj) die("cannot write into " + args.out);
    std::fprintf(fj, "{\n \"top\": \"%s\", \"cycles\": %" PRIu64 ", \"sim_seconds\": %.6f, \"cpu_seconds\": %.6f, "
                 "\"threads\": %u,\n", TOP_NAME, h.cycles, sim_s, cpu_s, h.ctx->threads());
    std::fprintf(fj, " \"planned_tokens\": %ld, \"output_tokens\": %ld, \"tlast_errors\": %ld, \"aborted\": %s,\n",
                 total_planned, total_out, tlast_errors, aborted ? "true" : "false");
    std::fprintf(fj, " \"status_names\": [");
    for (int i = 0; i < N_STATUS; ++i) std::fprintf(fj, "%s\"%s\"", i ? ", " : "", STATUS_NAMES[i]);
    std::fprintf(fj, "],\n \"errors\": [");
    for (size_t i = 0; i < errors.size(); ++i) {
        std::string e;
        for (char c : errors[i]) e += (c == '"' || c == '\\') ? '\'' : c;
        std::fprintf(fj, "%s\"%s\"", i ? ", " : "", e.c_str());
    }
    std::fprintf(fj, "],\n \"segments\": [\n");
    for (size_t i = 0; i < segs.size(); ++i) {
        const Segment& s = segs[i];
        std::fprintf(fj,
                     "  {\"start\": %ld, \"planned\": %ld, \"kind\": %d, \"param\": %d, \"accepted\": %ld, "
                     "\"beats_in\": %ld, \"outputs\": %ld, \"out_start\": %ld, \"c0\": %" PRIu64 ", \"c1\": %" PRIu64
                     ", \"timeout\": %s, \"counters\": [",
                     s.start, s.planned, s.kind, s.param, s.accepted, s.beats_in, s.outputs, s.out_start, s.c0, s.c1,
                     s.timeout ? "true" : "false");
        for (int j = 0; j < N_STATUS; ++j) std::fprintf(fj, "%s%" PRId64, j ? ", " : "", s.counters[j]);
        std::fprintf(fj, "]}%s\n", i + 1 < segs.size() ? "," : "");
    }
    std::fprintf(fj, " ]\n}\n");
    std::fclose(fj);
    return aborted ? 3 : 0;
}
