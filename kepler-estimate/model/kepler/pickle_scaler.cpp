#include "model/kepler/pickle_scaler.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "model/model_metadata.hpp"

namespace kepler::estimate {

namespace {

// Limits far above what a scaler of a few features needs, so a hostile file cannot make us allocate.
constexpr size_t kMaxBytes = 1u << 20;
constexpr size_t kMaxStack = 1024;
constexpr size_t kMaxMemo = 4096;
constexpr size_t kMaxString = 256;
constexpr size_t kMaxElements = 4096;
constexpr size_t kMaxContainer = 64;
// A MaxAbsScaler nests four deep (object, state dict, array wrapper, its shape tuple). A chain of
// TUPLE1 opcodes builds any depth in one byte per level, and a deep value is a deep recursion
// wherever it is walked: refused past this, and freed without recursion regardless (~Value).
constexpr uint32_t kMaxDepth = 32;

/// The only callables a MaxAbsScaler pickle names. Nothing is ever called: they are tags.
enum class Global { max_abs_scaler, array_wrapper, ndarray, dtype };

struct Value;
using Ref = std::shared_ptr<Value>;

/// A pickle value, restricted to what the scaler file holds. Shared because the memo aliases values.
struct Value {
    enum class Kind { none, boolean, integer, real, text, tuple, dict, global, object, dtype, array };
    Value() = default;
    Value(const Value&) = delete;
    Value& operator=(const Value&) = delete;
    ~Value();

    Kind kind = Kind::none;
    uint32_t depth = 1;                       // 1 + the deepest value it holds
    bool contained = false;                   // held by a tuple, dict or object: no longer changed
    int64_t integer = 0;                      // boolean, integer
    double real = 0;
    std::string text;                         // text; dtype: descr ("f8")
    char byteorder = '=';                     // dtype, after BUILD
    Global global = Global::ndarray;          // global; object: its class
    std::vector<Ref> items;                   // tuple
    std::vector<std::pair<std::string, Ref>> dict;  // dict; object: its state after BUILD
    std::vector<double> array;                // array
};

Value::~Value() {
    // Children whose last owner is this value are emptied here, one level at a time, so that freeing a
    // long chain never recurses (each child dies with no children of its own).
    std::vector<Ref> pending = std::move(items);
    for (auto& entry : dict) pending.push_back(std::move(entry.second));
    while (!pending.empty()) {
        Ref child = std::move(pending.back());
        pending.pop_back();
        if (child && child.use_count() == 1) {
            for (auto& item : child->items) pending.push_back(std::move(item));
            for (auto& entry : child->dict) pending.push_back(std::move(entry.second));
            child->items.clear();
            child->dict.clear();
        }
    }
}

Ref make(Value::Kind kind) {
    auto v = std::make_shared<Value>();
    v->kind = kind;
    return v;
}

const Value* find(const std::vector<std::pair<std::string, Ref>>& dict, std::string_view key) {
    for (const auto& [k, v] : dict) {
        if (k == key) return v.get();
    }
    return nullptr;
}

/// The interpreter. Every read is bounds-checked; every error names the byte offset.
class Unpickler {
public:
    explicit Unpickler(std::string_view bytes) : in_(bytes) {}

    Ref run() {
        while (true) {
            const size_t at = pos_;
            const uint8_t op = byte();
            if (op == '.') break;
            step(op, at);
        }
        if (stack_.size() != 1 || !marks_.empty()) fail(pos_, "the pickle does not end with exactly one value");
        return stack_.back();
    }

private:
    [[noreturn]] void fail(size_t at, const std::string& why) const {
        throw ModelError(fmt::format("scaler.pkl: {} (at byte {})", why, at));
    }
    std::string_view take(size_t n) {
        if (n > in_.size() - pos_) fail(pos_, fmt::format("truncated: {} more bytes expected", n));
        const std::string_view out = in_.substr(pos_, n);
        pos_ += n;
        return out;
    }
    uint8_t byte() { return static_cast<uint8_t>(take(1)[0]); }
    uint64_t little(size_t n) {
        const std::string_view b = take(n);
        uint64_t v = 0;
        for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(b[i])) << (8 * i);
        return v;
    }
    void push(Ref v) {
        if (stack_.size() >= kMaxStack) fail(pos_, "stack too deep");
        stack_.push_back(std::move(v));
    }
    Ref pop() {
        const size_t floor = marks_.empty() ? 0 : marks_.back();
        if (stack_.size() <= floor) fail(pos_, "stack underflow");
        Ref v = std::move(stack_.back());
        stack_.pop_back();
        return v;
    }
    std::vector<Ref> pop_to_mark() {
        if (marks_.empty()) fail(pos_, "no mark on the stack");
        const size_t mark = marks_.back();
        marks_.pop_back();
        std::vector<Ref> out(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
        stack_.resize(mark);
        return out;
    }
    Ref text_of(size_t n) {
        if (n > kMaxString) fail(pos_, fmt::format("string of {} bytes is longer than allowed", n));
        Ref v = make(Value::Kind::text);
        v->text = std::string(take(n));
        return v;
    }
    Ref integer(int64_t n) {
        Ref v = make(Value::Kind::integer);
        v->integer = n;
        return v;
    }
    Ref memo_get(uint64_t index, size_t at) {
        if (index >= memo_.size() || !memo_[index]) fail(at, fmt::format("memo index {} was never stored", index));
        return memo_[index];
    }
    /// Records that `container` now holds `part`. A value that is held is never changed afterwards
    /// (see `changeable`), so depths stay exact and no value can come to hold itself.
    void hold(Value& container, Value& part, size_t at) {
        // A dict still changeable can be fetched from the memo as one of its own values (SETITEMS).
        if (&container == &part) fail(at, "a value is made to hold itself");
        if (part.depth >= kMaxDepth) fail(at, fmt::format("values nest deeper than {} levels", kMaxDepth));
        container.depth = std::max(container.depth, part.depth + 1);
        part.contained = true;
    }
    Value& changeable(size_t at) {
        if (stack_.empty()) fail(at, "nothing on the stack to change");
        if (stack_.back()->contained) fail(at, "changes a value that is already inside another");
        return *stack_.back();
    }
    void memo_put(uint64_t index, size_t at) {
        if (index >= kMaxMemo) fail(at, "memo index too large");
        if (stack_.empty()) fail(at, "memo store with an empty stack");
        if (memo_.size() <= index) memo_.resize(index + 1);
        memo_[index] = stack_.back();
    }

    void step(uint8_t op, size_t at);
    void tuple_of(std::vector<Ref> items, size_t at);
    void stack_global(size_t at);
    void new_object(size_t at);
    void reduce(size_t at);
    void build(size_t at);
    void set_items(std::vector<Ref> items, size_t at);
    void read_inline_array(Value& wrapper, size_t at);

    std::string_view in_;
    size_t pos_ = 0;
    std::vector<Ref> stack_;
    std::vector<size_t> marks_;
    std::vector<Ref> memo_;
};

void Unpickler::step(uint8_t op, size_t at) {
    switch (op) {
        case 0x80: {  // PROTO
            const uint8_t proto = byte();
            if (proto < 2 || proto > 5) fail(at, fmt::format("pickle protocol {} is not 2 to 5", proto));
            return;
        }
        case 0x95: little(8); return;  // FRAME: a length hint only
        case 0x8c: push(text_of(byte())); return;              // SHORT_BINUNICODE
        case 'X': push(text_of(little(4))); return;            // BINUNICODE
        case 0x94: memo_put(memo_.size(), at); return;         // MEMOIZE
        case 'q': memo_put(byte(), at); return;                // BINPUT
        case 'r': memo_put(little(4), at); return;             // LONG_BINPUT
        case 'h': push(memo_get(byte(), at)); return;          // BINGET
        case 'j': push(memo_get(little(4), at)); return;       // LONG_BINGET
        case 0x93: stack_global(at); return;
        case ')': push(make(Value::Kind::tuple)); return;      // EMPTY_TUPLE
        case '}': push(make(Value::Kind::dict)); return;       // EMPTY_DICT
        case '(':                                              // MARK
            if (marks_.size() >= kMaxStack) fail(at, "too many marks");
            marks_.push_back(stack_.size());
            return;
        case 'N': push(make(Value::Kind::none)); return;
        case 0x88: case 0x89: {                                // NEWTRUE, NEWFALSE
            Ref v = make(Value::Kind::boolean);
            v->integer = op == 0x88;
            push(v);
            return;
        }
        case 'K': push(integer(byte())); return;               // BININT1
        case 'M': push(integer(static_cast<int64_t>(little(2)))); return;  // BININT2
        case 'J': push(integer(static_cast<int32_t>(little(4)))); return;  // BININT (signed)
        case 'G': {                                            // BINFLOAT, big-endian
            const uint64_t be = little(8);
            Ref v = make(Value::Kind::real);
            v->real = std::bit_cast<double>(__builtin_bswap64(be));
            push(v);
            return;
        }
        case 0x85: { Ref a = pop(); tuple_of({a}, at); return; }
        case 0x86: { Ref b = pop(), a = pop(); tuple_of({a, b}, at); return; }
        case 0x87: { Ref c = pop(), b = pop(), a = pop(); tuple_of({a, b, c}, at); return; }
        case 't': tuple_of(pop_to_mark(), at); return;
        case 0x81: new_object(at); return;
        case 'R': reduce(at); return;
        case 'b': build(at); return;
        case 'u': set_items(pop_to_mark(), at); return;
        case 's': { Ref v = pop(), k = pop(); set_items({k, v}, at); return; }
        default:
            fail(at, fmt::format("opcode 0x{:02x} is not allowed in a scaler pickle", op));
    }
}

void Unpickler::tuple_of(std::vector<Ref> items, size_t at) {
    if (items.size() > kMaxContainer) fail(at, "tuple too long");
    Ref t = make(Value::Kind::tuple);
    for (const Ref& item : items) hold(*t, *item, at);
    t->items = std::move(items);
    push(t);
}

void Unpickler::stack_global(size_t at) {
    Ref name = pop(), module = pop();
    if (module->kind != Value::Kind::text || name->kind != Value::Kind::text) fail(at, "STACK_GLOBAL without two strings");
    static const std::pair<std::string_view, Global> kAllowed[] = {
        {"sklearn.preprocessing._data.MaxAbsScaler", Global::max_abs_scaler},
        {"joblib.numpy_pickle.NumpyArrayWrapper", Global::array_wrapper},
        {"numpy.ndarray", Global::ndarray},
        {"numpy.dtype", Global::dtype},
    };
    const std::string full = module->text + "." + name->text;
    for (const auto& [allowed, global] : kAllowed) {
        if (full == allowed) {
            Ref g = make(Value::Kind::global);
            g->global = global;
            push(g);
            return;
        }
    }
    fail(at, fmt::format("global {} is not allowed (only MaxAbsScaler and numpy arrays are)", full));
}

void Unpickler::new_object(size_t at) {
    Ref args = pop(), cls = pop();
    if (cls->kind != Value::Kind::global || args->kind != Value::Kind::tuple || !args->items.empty() ||
        (cls->global != Global::max_abs_scaler && cls->global != Global::array_wrapper)) {
        fail(at, "NEWOBJ of something other than MaxAbsScaler() or NumpyArrayWrapper()");
    }
    Ref obj = make(Value::Kind::object);
    obj->global = cls->global;
    push(obj);
}

void Unpickler::reduce(size_t at) {
    // The one call a joblib array pickle makes: numpy.dtype("f8", False, True). Not called, recorded.
    Ref args = pop(), callable = pop();
    if (callable->kind != Value::Kind::global || callable->global != Global::dtype || args->kind != Value::Kind::tuple ||
        args->items.size() != 3 || args->items[0]->kind != Value::Kind::text) {
        fail(at, "REDUCE other than numpy.dtype(descr, align, copy)");
    }
    Ref d = make(Value::Kind::dtype);
    d->text = args->items[0]->text;
    push(d);
}

void Unpickler::set_items(std::vector<Ref> items, size_t at) {
    if (items.size() % 2 != 0) fail(at, "SETITEMS with an odd number of values");
    Value& dict = changeable(at);
    if (dict.kind != Value::Kind::dict) fail(at, "SETITEMS on something other than a dict");
    for (size_t i = 0; i < items.size(); i += 2) {
        if (items[i]->kind != Value::Kind::text) fail(at, "dict key is not a string");
        if (dict.dict.size() >= kMaxContainer) fail(at, "dict too large");
        hold(dict, *items[i + 1], at);
        dict.dict.emplace_back(items[i]->text, items[i + 1]);
    }
}

void Unpickler::build(size_t at) {
    Ref state = pop();
    Value& target = changeable(at);
    if (target.kind == Value::Kind::dtype) {
        // numpy's dtype state: (version, byteorder, ...); only the byte order matters here.
        if (state->kind != Value::Kind::tuple || state->items.size() < 2 || state->items[1]->kind != Value::Kind::text) {
            fail(at, "dtype state is not (version, byteorder, ...)");
        }
        target.byteorder = state->items[1]->text.size() == 1 ? state->items[1]->text[0] : '?';
        return;
    }
    if (target.kind != Value::Kind::object || state->kind != Value::Kind::dict) fail(at, "BUILD of something other than an object with a dict");
    hold(target, *state, at);
    target.dict = state->dict;
    if (target.global == Global::array_wrapper) read_inline_array(target, at);
}

void Unpickler::read_inline_array(Value& wrapper, size_t at) {
    // joblib writes the array's bytes into the stream right after the wrapper's BUILD (after an
    // alignment pad when numpy_array_alignment_bytes is set); its unpickler swaps the wrapper for them.
    const Value* subclass = find(wrapper.dict, "subclass");
    const Value* shape = find(wrapper.dict, "shape");
    const Value* order = find(wrapper.dict, "order");
    const Value* dtype = find(wrapper.dict, "dtype");
    if (!subclass || subclass->kind != Value::Kind::global || subclass->global != Global::ndarray) fail(at, "array is not a numpy.ndarray");
    if (!order || order->kind != Value::Kind::text || (order->text != "C" && order->text != "F")) fail(at, "array order is not C or F");
    if (!dtype || dtype->kind != Value::Kind::dtype || dtype->text != "f8" || dtype->byteorder != '<') {
        fail(at, "array dtype is not little-endian float64");
    }
    if (!shape || shape->kind != Value::Kind::tuple || shape->items.size() != 1 || shape->items[0]->kind != Value::Kind::integer) {
        fail(at, "array is not one-dimensional");
    }
    const int64_t count = shape->items[0]->integer;
    if (count < 0 || static_cast<uint64_t>(count) > kMaxElements) fail(at, fmt::format("array of {} elements", count));
    if (find(wrapper.dict, "numpy_array_alignment_bytes") != nullptr) {
        const uint8_t pad = byte();
        if (pad > 16) fail(pos_ - 1, fmt::format("alignment pad of {} bytes", pad));
        take(pad);
    }
    Ref array = make(Value::Kind::array);
    for (int64_t i = 0; i < count; ++i) array->array.push_back(std::bit_cast<double>(little(8)));
    stack_.back() = array;
}

}  // namespace

MaxAbsScaler parse_max_abs_scaler(std::string_view bytes) {
    if (bytes.size() > kMaxBytes) throw ModelError(fmt::format("scaler.pkl: {} bytes is too large for a scaler", bytes.size()));
    const Ref top = Unpickler(bytes).run();
    if (top->kind != Value::Kind::object || top->global != Global::max_abs_scaler) {
        throw ModelError("scaler.pkl: the pickle is not a MaxAbsScaler");
    }
    const Value* scale = find(top->dict, "scale_");
    if (!scale || scale->kind != Value::Kind::array || scale->array.empty()) {
        throw ModelError("scaler.pkl: MaxAbsScaler has no fitted scale_ array");
    }
    if (const Value* n = find(top->dict, "n_features_in_");
        n && (n->kind != Value::Kind::integer || n->integer != static_cast<int64_t>(scale->array.size()))) {
        throw ModelError("scaler.pkl: n_features_in_ does not match scale_");
    }
    for (double s : scale->array) {
        if (!std::isfinite(s) || s <= 0) throw ModelError("scaler.pkl: a scale is not a finite positive number");
    }
    return MaxAbsScaler{scale->array};
}

}  // namespace kepler::estimate
