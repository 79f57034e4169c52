// Every driver entry point that can allocate device memory is hooked (charged) or refused, under
// every ABI variant cuGetProcAddress can return: checked against the CUDA headers libvgpu is built
// with.
//
// The rule (src/vgpu/README.md, "Allocating entry points"): an entry point of cuda.h is a candidate
// when its name says that it allocates, creates, retains, imports, registers, loads, reserves,
// opens, maps, instantiates, uploads or sets a limit (kVerbs), or when it hands back a device
// pointer, an array, a mipmapped array, a physical memory handle, a memory pool, a context or a
// green context (kHandles). Every candidate must be in kClassified; those that take device memory
// of the process's own are kCharged or kRefused, and then each of their exported variants (legacy,
// _v2.., _ptsz/_ptds, from cuda.h) and each ABI of cudaTypedefs.h
// (PFN_<base>_v<version>[_ptsz|_ptds], what cuGetProcAddress returns for that cudaVersion and flag)
// must be in vgpu_hooks.def. A new allocating symbol in a newer cuda.h therefore fails here until
// it is hooked, refused or classified with a reason.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace {

struct Hook {
  std::string symbol, base;
  int version;
  int per_thread;
};

const std::vector<Hook>& Hooks() {
  static const std::vector<Hook> hooks = {
#define VGPU_CU(sym, base, ver, pt, params, args) {#sym, #base, ver, pt},
#include "vgpu/vgpu_hooks.def"
  };
  return hooks;
}

enum class Use {
  kCharged,         // hooked: charged to the limit, credited when freed
  kRefused,         // hooked: refused on a limited device (nothing to charge in step)
  kHost,            // host memory (pinned or registered): the container's memory cgroup bounds it
  kImported,        // memory another process or API allocated (charged there, or not this GPU's)
  kExisting,        // returns or uses an object that exists already; allocates nothing
  kNoDeviceMemory,  // creates an object without device memory of a size the caller chooses
  kKnownLimit,      // device memory that is not charged: documented in README.md and security.md
};

struct Classified {
  const char* base;
  Use use;
};

// Every candidate base name of cuda.h (CUDA 13.0), sorted by use.
const Classified kClassified[] = {
    {"cuMemAlloc", Use::kCharged},
    {"cuMemAllocPitch", Use::kCharged},
    {"cuMemAllocManaged", Use::kCharged},
    {"cuMemAllocAsync", Use::kCharged},
    {"cuMemAllocFromPoolAsync", Use::kCharged},
    {"cuMemCreate", Use::kCharged},
    {"cuArrayCreate", Use::kCharged},
    {"cuArray3DCreate", Use::kCharged},
    {"cuMipmappedArrayCreate", Use::kCharged},
    {"cuCtxCreate", Use::kCharged},
    {"cuDevicePrimaryCtxRetain", Use::kCharged},
    {"cuGreenCtxCreate", Use::kCharged},
    {"cuGraphAddMemAllocNode", Use::kRefused},
    {"cuGraphAddNode", Use::kRefused},  // refused for CU_GRAPH_NODE_TYPE_MEM_ALLOC only
    {"cuMemAllocHost", Use::kHost},
    {"cuMemHostAlloc", Use::kHost},
    {"cuMemHostRegister", Use::kHost},
    {"cuMemHostGetDevicePointer", Use::kHost},
    {"cuIpcOpenMemHandle", Use::kImported},
    {"cuIpcOpenEventHandle", Use::kImported},
    {"cuMemImportFromShareableHandle", Use::kImported},
    {"cuMemPoolImportFromShareableHandle", Use::kImported},
    {"cuMemPoolImportPointer", Use::kImported},
    {"cuImportExternalMemory", Use::kImported},
    {"cuImportExternalSemaphore", Use::kImported},
    {"cuExternalMemoryGetMappedBuffer", Use::kImported},
    {"cuExternalMemoryGetMappedMipmappedArray", Use::kImported},
    {"cuGraphicsMapResources", Use::kImported},
    {"cuGraphicsResourceSetMapFlags", Use::kImported},
    {"cuGraphicsResourceGetMappedPointer", Use::kImported},
    {"cuGraphicsResourceGetMappedMipmappedArray", Use::kImported},
    {"cuGraphicsSubResourceGetMappedArray", Use::kImported},
    {"cuArrayGetPlane", Use::kExisting},
    {"cuMipmappedArrayGetLevel", Use::kExisting},
    {"cuCtxAttach", Use::kExisting},        // legacy: counts a use of the current context
    {"cuCtxFromGreenCtx", Use::kExisting},  // the green context's own handle (charged at creation)
    {"cuCtxGetCurrent", Use::kExisting},
    {"cuCtxPopCurrent", Use::kExisting},
    {"cuStreamGetCtx", Use::kExisting},
    {"cuStreamGetGreenCtx", Use::kExisting},
    {"cuDeviceGetDefaultMemPool", Use::kExisting},
    {"cuDeviceGetMemPool", Use::kExisting},
    {"cuMemGetDefaultMemPool", Use::kExisting},
    {"cuMemGetMemPool", Use::kExisting},
    {"cuMemGetAddressRange", Use::kExisting},
    {"cuMemGetAllocationGranularity", Use::kExisting},
    {"cuMemGetAllocationPropertiesFromHandle", Use::kExisting},
    {"cuMemRetainAllocationHandle", Use::kExisting},  // hooked: a reference keeps the charge
    {"cuMemAddressReserve", Use::kExisting},          // virtual addresses only
    {"cuMemMap", Use::kExisting},  // maps cuMemCreate memory; hooked: charged until the last unmap
    {"cuMemMapArrayAsync", Use::kExisting},  // the same, for sparse arrays
    {"cuMemPrefetchBatchAsync", Use::kExisting},
    {"cuMemDiscardBatchAsync", Use::kExisting},
    {"cuMemDiscardAndPrefetchBatchAsync", Use::kExisting},
    {"cuMemcpyBatchAsync", Use::kExisting},
    {"cuGraphMemAllocNodeGetParams", Use::kExisting},
    {"cuGraphMemFreeNodeGetParams", Use::kExisting},
    {"cuModuleGetGlobal", Use::kExisting},
    {"cuModuleGetLoadingMode", Use::kExisting},
    {"cuLibraryGetGlobal", Use::kExisting},
    {"cuLibraryGetManaged", Use::kExisting},
    {"cuFuncIsLoaded", Use::kExisting},
    {"cuSurfRefGetArray", Use::kExisting},
    {"cuTexRefGetAddress", Use::kExisting},
    {"cuTexRefGetArray", Use::kExisting},
    {"cuTexRefGetMipmappedArray", Use::kExisting},
    {"cuTensorMapEncodeIm2col", Use::kExisting},  // host-side descriptors of existing memory
    {"cuTensorMapEncodeIm2colWide", Use::kExisting},
    {"cuTensorMapEncodeTiled", Use::kExisting},
    {"cuTensorMapReplaceAddress", Use::kExisting},
    {"cuMemPoolCreate", Use::kNoDeviceMemory},    // holds nothing until cuMemAllocFromPoolAsync
    {"cuMulticastCreate", Use::kNoDeviceMemory},  // backed by cuMemCreate memory it is bound to
    {"cuStreamCreate", Use::kNoDeviceMemory},
    {"cuStreamCreateWithPriority", Use::kNoDeviceMemory},
    {"cuGreenCtxStreamCreate", Use::kNoDeviceMemory},
    {"cuEventCreate", Use::kNoDeviceMemory},
    {"cuGraphCreate", Use::kNoDeviceMemory},
    {"cuGraphConditionalHandleCreate", Use::kNoDeviceMemory},
    {"cuGraphInstantiate", Use::kNoDeviceMemory},  // its memory nodes are refused when added
    {"cuGraphInstantiateWithFlags", Use::kNoDeviceMemory},
    {"cuGraphInstantiateWithParams", Use::kNoDeviceMemory},
    {"cuGraphUpload", Use::kNoDeviceMemory},
    {"cuGraphRetainUserObject", Use::kNoDeviceMemory},
    {"cuUserObjectCreate", Use::kNoDeviceMemory},
    {"cuUserObjectRetain", Use::kNoDeviceMemory},
    {"cuLinkCreate", Use::kNoDeviceMemory},
    {"cuTexObjectCreate", Use::kNoDeviceMemory},
    {"cuSurfObjectCreate", Use::kNoDeviceMemory},
    {"cuTexRefCreate", Use::kNoDeviceMemory},
    {"cuDeviceRegisterAsyncNotification", Use::kNoDeviceMemory},
    {"cuLogsRegisterCallback", Use::kNoDeviceMemory},
    {"cuModuleLoad", Use::kKnownLimit},  // module images and their __device__ variables
    {"cuModuleLoadData", Use::kKnownLimit},
    {"cuModuleLoadDataEx", Use::kKnownLimit},
    {"cuModuleLoadFatBinary", Use::kKnownLimit},
    {"cuLibraryLoadData", Use::kKnownLimit},
    {"cuLibraryLoadFromFile", Use::kKnownLimit},
    {"cuFuncLoad", Use::kKnownLimit},
    {"cuCtxSetLimit", Use::kKnownLimit},  // device malloc heap, stack and printf FIFO sizes
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// cuGetProcAddress's base name of an exported symbol: without _ptds/_ptsz and a _v<n> suffix.
std::string BaseOf(std::string s) {
  static const std::regex kPt("_pt(ds|sz)$"), kVer("_v[0-9]+$");
  s = std::regex_replace(s, kPt, "");
  return std::regex_replace(s, kVer, "");
}

// cuda.h, read as the driver is built: a declaration before the __CUDA_API_VERSION_INTERNAL block
// exports the name its #define maps it to (both the default-stream and the _ptds/_ptsz name for
// __CUDA_API_PTDS/PTSZ), a declaration inside the block (the legacy ABIs) its own name.
struct Header {
  std::map<std::string, std::string> params;  // exported symbol -> parameter list
  bool ok = false;

  explicit Header(const std::string& text) {
    size_t internal = text.find("#undef cuMemHostRegister");
    if (internal == std::string::npos) return;
    std::map<std::string, std::set<std::string>> defines;
    static const std::regex kDefine(
        R"(\n[ \t]*#define[ \t]+(cu\w+)[ \t]+(?:__CUDA_API_PT(DS|SZ)\((cu\w+)\)|(cu\w+))[ \t]*(?=\n))");
    std::string head = text.substr(0, internal);
    for (std::sregex_iterator it(head.begin(), head.end(), kDefine), end; it != end; ++it) {
      const std::smatch& m = *it;
      if (m[3].matched) {
        std::string suffix = m[2] == "DS" ? "_ptds" : "_ptsz";
        defines[m[1]].insert({m[3].str(), m[3].str() + suffix});
      } else {
        defines[m[1]].insert(m[4].str());
      }
    }
    static const std::regex kDecl(R"(CUresult\s+CUDAAPI\s+(cu\w+)\s*\(([^;]*?)\)\s*;)");
    for (std::sregex_iterator it(text.begin(), text.end(), kDecl), end; it != end; ++it) {
      const std::smatch& m = *it;
      std::set<std::string> names = {m[1].str()};
      auto d = defines.find(m[1]);
      if (static_cast<size_t>(m.position(0)) < internal && d != defines.end()) names = d->second;
      for (const std::string& n : names) params[n] = m[2];
    }
    ok = true;
  }

  // Base name -> exported variants, for the candidates of the rule above.
  std::map<std::string, std::set<std::string>> Candidates() const {
    static const std::regex kVerbs(
        "Alloc|Create|Retain|Import|Register|Load|Reserve|Open|Instantiate|Upload|SetLimit|AddNode|"
        "Map(?!ped)");
    static const std::regex kHandles(
        R"(\b(CUdeviceptr(_v1|_v2)?|CUarray|CUmipmappedArray|CUmemGenericAllocationHandle|CUmemoryPool|CUcontext|CUgreenCtx)\s*\*)");
    std::map<std::string, std::set<std::string>> out;
    for (const auto& [sym, p] : params) {
      std::string base = BaseOf(sym);
      if (std::regex_search(base, kVerbs) || std::regex_search(p, kHandles)) out[base].insert(sym);
    }
    return out;
  }
};

// cudaTypedefs.h: the ABIs cuGetProcAddress hands out, as (base, version, per-thread).
std::set<std::tuple<std::string, int, int>> ProcAbis(const std::string& text) {
  static const std::regex kPfn(
      R"(typedef\s+CUresult\s*\(\s*CUDAAPI\s*\*\s*PFN_(cu\w+?)_v([0-9]{4,5})(_pt(?:ds|sz))?\s*\))");
  std::set<std::tuple<std::string, int, int>> out;
  for (std::sregex_iterator it(text.begin(), text.end(), kPfn), end; it != end; ++it) {
    out.emplace((*it)[1].str(), std::stoi((*it)[2].str()), (*it)[3].matched ? 1 : 0);
  }
  return out;
}

class VgpuApiCoverage : public ::testing::Test {
 protected:
  void SetUp() override {
    cuda_h_ = ReadFile(VGPU_CUDA_INCLUDE_DIR "/cuda.h");
    typedefs_h_ = ReadFile(VGPU_CUDA_INCLUDE_DIR "/cudaTypedefs.h");
    ASSERT_FALSE(cuda_h_.empty()) << VGPU_CUDA_INCLUDE_DIR "/cuda.h";
    ASSERT_FALSE(typedefs_h_.empty()) << VGPU_CUDA_INCLUDE_DIR "/cudaTypedefs.h";
  }
  static bool Allocates(Use u) { return u == Use::kCharged || u == Use::kRefused; }
  static std::set<std::string> HookedSymbols() {
    std::set<std::string> s;
    for (const Hook& h : Hooks()) s.insert(h.symbol);
    return s;
  }
  std::string cuda_h_, typedefs_h_;
};

// The parsers see what the rule needs (else every other check would pass on nothing).
TEST_F(VgpuApiCoverage, HeadersAreReadAsTheDriverExportsThem) {
  Header h(cuda_h_);
  ASSERT_TRUE(h.ok);
  for (const char* sym : {"cuMemAlloc", "cuMemAlloc_v2", "cuArrayCreate", "cuArrayCreate_v2",
                          "cuMemAllocAsync", "cuMemAllocAsync_ptsz", "cuCtxCreate_v4",
                          "cuMemcpyHtoD_v2_ptds", "cuGraphAddNode", "cuGraphAddNode_v2"}) {
    EXPECT_TRUE(h.params.count(sym)) << sym;
  }
  auto c = h.Candidates();
  EXPECT_EQ(c["cuArrayCreate"], (std::set<std::string>{"cuArrayCreate", "cuArrayCreate_v2"}));
  EXPECT_EQ(c["cuMemAllocAsync"],
            (std::set<std::string>{"cuMemAllocAsync", "cuMemAllocAsync_ptsz"}));
  auto abis = ProcAbis(typedefs_h_);
  for (const auto& abi : {std::make_tuple(std::string("cuArrayCreate"), 2000, 0),
                          std::make_tuple(std::string("cuArrayCreate"), 3020, 0),
                          std::make_tuple(std::string("cuMemAllocAsync"), 11020, 1),
                          std::make_tuple(std::string("cuGreenCtxCreate"), 12040, 0)}) {
    EXPECT_TRUE(abis.count(abi)) << std::get<0>(abi) << " " << std::get<1>(abi);
  }
}

// A candidate of the header that nobody classified fails: hook it, refuse it, or add it to
// kClassified with its reason.
TEST_F(VgpuApiCoverage, EveryCandidateOfTheHeaderIsClassified) {
  std::set<std::string> known;
  for (const Classified& c : kClassified) known.insert(c.base);
  for (const auto& [base, syms] : Header(cuda_h_).Candidates()) {
    EXPECT_TRUE(known.count(base)) << base << " (" << *syms.begin()
                                   << ") may allocate device memory: hook, refuse or classify it";
  }
}

// Every exported variant of an allocating entry point is hooked: the legacy cuArrayCreate next to
// cuArrayCreate_v2, the _ptsz next to the default-stream variant.
TEST_F(VgpuApiCoverage, EveryExportedVariantOfAnAllocatorIsHooked) {
  auto candidates = Header(cuda_h_).Candidates();
  std::set<std::string> hooked = HookedSymbols();
  for (const Classified& c : kClassified) {
    if (!Allocates(c.use)) continue;
    for (const std::string& sym : candidates[c.base]) {
      EXPECT_TRUE(hooked.count(sym))
          << sym << " allocates device memory and is not in vgpu_hooks.def";
    }
  }
}

// Every ABI that cuGetProcAddress returns for an allocating base (any cudaVersion, either stream
// flag) has its hook, so that routing (by identity of the driver's pointer) never hands back an
// unhooked allocator; and every hook's (base, version, per-thread) is an ABI the header defines.
TEST_F(VgpuApiCoverage, EveryProcAddressAbiOfAnAllocatorIsHooked) {
  auto abis = ProcAbis(typedefs_h_);
  std::set<std::tuple<std::string, int, int>> hooked;
  for (const Hook& h : Hooks()) hooked.emplace(h.base, h.version, h.per_thread);
  for (const Classified& c : kClassified) {
    if (!Allocates(c.use)) continue;
    for (const auto& abi : abis) {
      if (std::get<0>(abi) != c.base) continue;
      EXPECT_TRUE(hooked.count(abi)) << "cuGetProcAddress(\"" << c.base << "\", "
                                     << std::get<1>(abi) << (std::get<2>(abi) ? ", per-thread" : "")
                                     << ") returns an ABI that vgpu_hooks.def does not hook";
    }
  }
  Header h(cuda_h_);
  for (const Hook& hk : Hooks()) {
    EXPECT_TRUE(abis.count({hk.base, hk.version, hk.per_thread}))
        << hk.symbol << ": no PFN_" << hk.base << "_v" << hk.version
        << (hk.per_thread ? "_ptsz" : "") << " in cudaTypedefs.h";
    EXPECT_TRUE(h.params.count(hk.symbol)) << hk.symbol << " is not a symbol of cuda.h";
    EXPECT_EQ(BaseOf(hk.symbol), hk.base) << hk.symbol;
  }
}

}  // namespace
