# ferry: one Makefile, with or without nvcc.
#   make              library, tool, samples, tests (CUDA when nvcc is found)
#   make CUDA=0       without CUDA
#   make DIST=0       without MPI/NCCL (data-parallel training; built when mpicc is found)
#   make CURL=0       without libcurl (shards by URL: http(s)://, s3://; built when
#                     curl/curl.h is found, Debian libcurl4-openssl-dev)
#   make STATIC=1     link libpng, zlib and the CUDA runtime statically
#   make CUDA_ARCH=90 GPU code for those architectures only ("80 90" or 80,90; default:
#                     sm_75 to sm_120, as many as nvcc builds, and PTX of the newest)
#   make BLAS=blas    the reference CBLAS (libblas-dev) instead of OpenBLAS; any other
#                     CBLAS with BLAS_LIBS="-l..." (and BLAS_HEADER, BLAS_CFLAGS)
#   make test         install missing packages, build, run the suite (plain + ASan/UBSan + TSan,
#                     each also on the simulated GPU; lint)
#   make check        the quick tier: the plain build's tests, also on the simulated GPU
#   make WERROR=1     warnings are errors (.ci/run); CFLAGS=... adds to ferry's own flags
#   make run          install missing packages, then the demo
#   make install      headers, libferry and libferry-train (.a, .so.MAJOR*), bin/ferry,
#                     ferry.pc and ferry-train.pc under $(DESTDIR)$(PREFIX) (default
#                     /usr/local); make uninstall
#   make V=1          print whole commands instead of "  CC  src/x.c"
# Two libraries (docs/DESIGN.md, "Two libraries"): libferry, the data path (libpng,
# libjpeg, zlib, pthreads, libcurl with CURL=1, the CUDA runtime with CUDA=1), and
# libferry-train, the training stack on top of it (BLAS, cuBLAS, MPI/NCCL with DIST=1).
.DEFAULT_GOAL := all
BUILD    ?= build
CUDA     ?= auto
CURL     ?= auto
STATIC   ?= 0
SAN      ?=
CUDA_ARCH ?=
BLAS     ?= openblas
DIST     ?= auto
CC       ?= gcc
V        ?= 0

# "  CC   src/x.c" per step, or the whole command with V=1; errors show either way.
# Used as $(call quiet,CC,$<)command: one shell line, silent unless V=1.
quiet = $(if $(filter 1,$(V)),,@printf '  %-5s%s\n' '$(1)' '$(2)';)

NVCC_FOUND := $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
CUDA_ASKED := $(CUDA)
ifeq ($(CUDA),auto)
  CUDA := $(if $(NVCC_FOUND),1,0)
endif
NVCC      ?= $(if $(NVCC_FOUND),$(NVCC_FOUND),nvcc)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))

# CFLAGS is the user's (optimisation, debug info, extra warnings): it adds to
# FERRY_CFLAGS, which holds what ferry needs to be correct and comes last, so
# `make CFLAGS=-O3` cannot drop -std=c11 or -ffp-contract=off. -Werror only with
# WERROR=1 (.ci/run sets it): another compiler's new warnings do not stop a user.
CFLAGS   ?= -O2 -g
WERROR   ?= 0
FERRY_CFLAGS := -std=c11 -Wall -Wextra $(if $(filter 1,$(WERROR)),-Werror) -fPIC -pthread -D_GNU_SOURCE \
                -ffp-contract=off -Iinclude -Isrc -MMD -MP
LIB_CFLAGS := -fvisibility=hidden
comma := ,
space := $(subst ,, )
# The CPU's matrix products take any CBLAS. Debian keeps the reference one's header
# as cblas-netlib.h and its library in /usr/lib/<triplet>/blas: plain cblas.h and
# libblas.so are alternatives links that may point at OpenBLAS, so BLAS=blas names
# the reference files directly when they are there (rpath: libblas.so.3 too).
REF_BLAS_DIR := $(if $(filter blas,$(BLAS)),$(patsubst %/,%,$(dir $(firstword $(wildcard /usr/lib/*/blas/libblas.so)))))
BLAS_HEADER ?= $(if $(and $(filter blas,$(BLAS)),$(wildcard /usr/include/*/cblas-netlib.h)),cblas-netlib.h,cblas.h)
BLAS_LIBS   ?= $(if $(REF_BLAS_DIR),-L$(REF_BLAS_DIR) -Wl$(comma)-rpath$(comma)$(REF_BLAS_DIR)) -l$(BLAS)
FERRY_CFLAGS   += $(BLAS_CFLAGS) $(if $(filter-out cblas.h,$(BLAS_HEADER)),-DFERRY_CBLAS_HEADER="<$(BLAS_HEADER)>")
# CORE_LIBS: what libferry links; TRAIN_LIBS: what libferry-train adds on top.
# A program linking both archives takes LDLIBS, the two together.
CORE_LIBS  := -lpng -ljpeg -lz -lm -pthread
TRAIN_LIBS := $(BLAS_LIBS) -lz -lm
ifeq ($(STATIC),1)
  CORE_LIBS := -Wl,-Bstatic -lpng16 -ljpeg -lz -Wl,-Bdynamic -lm -pthread
  TRAIN_LIBS := $(BLAS_LIBS) -Wl,-Bstatic -lz -Wl,-Bdynamic -lm
endif
# The shared libraries take libpng and zlib as shared libraries even with STATIC=1:
# their archives are not position-independent.
so_libs = $(if $(filter 1,$(STATIC)),$(filter-out -Wl$(comma)-Bstatic -Wl$(comma)-Bdynamic,$(1)),$(1))

SRC_C  := $(sort $(shell find src -name '*.c'))
SRC_CU :=
ifeq ($(CUDA),1)
  FERRY_CFLAGS  += -DFERRY_HAVE_CUDA=1 -I$(CUDA_HOME)/include
  SRC_CU  := $(sort $(shell find src -name '*.cu'))
  # Machine code (SASS) for each GPU generation from Turing (sm_75) to Blackwell
  # (sm_120) that this nvcc builds, asked once per make (milliseconds), and PTX of
  # the newest, which the driver JIT-compiles for GPUs newer than all of them.
  CUDA_ARCH_LIST := $(subst $(comma), ,$(CUDA_ARCH))
  ifeq ($(strip $(CUDA_ARCH_LIST)),)
    CUDA_ARCH_LIST := $(filter $(patsubst sm_%,%,$(shell $(NVCC) --list-gpu-code 2>/dev/null)),75 80 86 89 90 100 120)
    ifeq ($(CUDA_ARCH_LIST),)
      $(warning ferry: $(NVCC) --list-gpu-code names none of sm_75..sm_120; building sm_75 (set CUDA_ARCH))
      CUDA_ARCH_LIST := 75
    endif
  endif
  # Numerically newest: two-digit architectures sort before three-digit ones.
  CUDA_PTX   := $(lastword $(sort $(filter-out 1%,$(CUDA_ARCH_LIST))) $(sort $(filter 1%,$(CUDA_ARCH_LIST))))
  CUDA_ARCHS := $(CUDA_ARCH_LIST:%=sm_%) compute_$(CUDA_PTX)
  NVFLAGS := -O2 -std=c++17 -Iinclude -Isrc -DFERRY_HAVE_CUDA=1 -Xcompiler -fPIC,-fvisibility=hidden,-fno-exceptions,-fno-threadsafe-statics,-Wall,-Wextra$(if $(filter 1,$(WERROR)),$(comma)-Werror) \
             $(foreach a,$(CUDA_ARCH_LIST),-gencode arch=compute_$(a),code=sm_$(a)) \
             -gencode arch=compute_$(CUDA_PTX),code=compute_$(CUDA_PTX) -MMD -MP
  ifeq ($(STATIC),1)
    CUDA_LIBS := -L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt -Wl,-rpath,$(CUDA_HOME)/lib64
  else
    CUDA_LIBS := -L$(CUDA_HOME)/lib64 -lcudart -Wl,-rpath,$(CUDA_HOME)/lib64
  endif
  CORE_LIBS  += $(CUDA_LIBS)
  TRAIN_LIBS += -L$(CUDA_HOME)/lib64 -lcublas $(CUDA_LIBS)
  BUILD_NOTE := ferry: building with CUDA ($(NVCC), $(CUDA_ARCHS))
else
  SRC_C   := $(filter-out %_cuda.c,$(SRC_C))
  BUILD_NOTE := ferry: building without CUDA (CPU only$(if $(NVCC_FOUND),; CUDA=0 given,; nvcc not found))
endif

# Distributed training: MPI (DIST=1), NCCL (from the CUDA toolkit) on top when
# CUDA is built and nccl.h is there; part of libferry-train (docs/DESIGN.md says
# why). Without MPI, model/distributed/nompi.c answers every call with "built without
# MPI". DIST=0 or 1 fixes libferry-train's dependencies; the default, auto,
# takes MPI when mpicc is found and says which it picked.
DIST_ASKED := $(DIST)
ifeq ($(DIST),auto)
  DIST := $(if $(shell command -v mpicc 2>/dev/null),1,0)
  DIST_NOTE := ferry: DIST=auto picked DIST=$(DIST) ($(if $(filter 1,$(DIST)),mpicc found: libferry-train needs MPI,no mpicc: libferry-train without MPI)); DIST=0 or DIST=1 fixes it
endif
ifeq ($(DIST),1)
  FERRY_CFLAGS += -DFERRY_HAVE_MPI=1 $(patsubst -I%,-isystem %,$(shell mpicc --showme:compile))
  TRAIN_LIBS += $(shell mpicc --showme:link)
  SRC_C  := $(filter-out %/nompi.c,$(SRC_C))
  NCCL   := $(if $(filter 1,$(CUDA)),$(if $(wildcard $(CUDA_HOME)/include/nccl.h),1,0),0)
  ifeq ($(NCCL),1)
    FERRY_CFLAGS += -DFERRY_HAVE_NCCL=1
    TRAIN_LIBS += -L$(CUDA_HOME)/lib64 -lnccl
  else
    SRC_C  := $(filter-out src/model/distributed/nccl_cuda.c,$(SRC_C))
  endif
  BUILD_NOTE += (MPI$(if $(filter 1,$(NCCL)), + NCCL))
else
  SRC_C  := $(filter-out src/model/distributed/%,$(SRC_C)) src/model/distributed/nompi.c
  BUILD_NOTE += (no MPI)
endif

# Remote shards: libcurl when its header is found; without it,
# dataset/remote/remote_nocurl.c refuses each URL by name.
CURL_ASKED := $(CURL)
ifeq ($(CURL),auto)
  CURL := $(if $(shell printf '\043include <curl/curl.h>\n' | $(CC) -E -x c - >/dev/null 2>&1 && echo y),1,0)
endif
ifeq ($(CURL),1)
  FERRY_CFLAGS += -DFERRY_HAVE_CURL=1
  CORE_LIBS += -lcurl
  SRC_C  := $(filter-out src/dataset/remote/remote_nocurl.c,$(SRC_C))
  BUILD_NOTE += (libcurl: shards by URL)
else
  SRC_C  := $(filter-out src/dataset/remote/remote_fetch.c,$(SRC_C))
  BUILD_NOTE += (no libcurl: shards by URL refused$(if $(filter auto,$(CURL_ASKED)),; curl/curl.h not found))
endif

ifneq ($(SAN),)
  FERRY_CFLAGS  += -fsanitize=$(SAN) -fno-omit-frame-pointer -fno-sanitize-recover=all -O1
  LDFLAGS += -fsanitize=$(SAN)
endif
# FERRY_ASSERT (src/common/assert.h) is on in sanitizer builds and with DEBUG=1.
ifneq ($(SAN)$(filter 1,$(DEBUG)),)
  FERRY_CFLAGS  += -DFERRY_DEBUG=1
  NVFLAGS += -DFERRY_DEBUG=1
endif

# The simulated GPU (FERRY_SIM_GPUS=N) runs the CUDA sources themselves, compiled
# a second time by the host C++ compiler against src/device/sim/cuda_sim.cuh. That
# needs the CUDA toolkit's headers (cuda_fp16.h, cuda_bf16.h, cublas_api.h: their
# host halves), not nvcc and not a GPU, so CUDA=0 builds take it too when they are
# there; without them the simulated GPU runs the CPU kernels. SIM_KERNELS=0 turns
# it off. The objects may contract a*b+c into an FMA, as nvcc does by default
# (-fmad=true): -ffp-contract=fast, with -mfma when this CPU has FMA.
SIM_KERNELS ?= auto
CXX      ?= g++
SIM_CUDA_INC := $(patsubst %/cublas_api.h,%,$(firstword $(wildcard $(CUDA_HOME)/include/cublas_api.h \
                  /usr/local/cuda/include/cublas_api.h /usr/include/cublas_api.h)))
ifeq ($(SIM_KERNELS),auto)
  SIM_KERNELS := $(if $(and $(SIM_CUDA_INC),$(wildcard $(SIM_CUDA_INC)/cuda_fp16.h)),1,0)
endif
SRC_SIMCU :=
ifeq ($(SIM_KERNELS),1)
  SRC_SIMCU := $(sort $(shell find src -name '*.cu'))
  FERRY_CFLAGS += -DFERRY_SIM_KERNELS=1 $(if $(filter 1,$(CUDA)),,-isystem $(SIM_CUDA_INC))
  SIM_FMA   := $(if $(shell grep -qw fma /proc/cpuinfo 2>/dev/null && echo y),-mfma)
  SIMCXXFLAGS = -x c++ -std=c++17 $(filter-out -std=c11 -ffp-contract=off,$(CFLAGS) $(FERRY_CFLAGS)) \
                -isystem $(SIM_CUDA_INC) \
                -ffp-contract=fast $(SIM_FMA) -fno-exceptions -fno-rtti -fno-threadsafe-statics
  BUILD_NOTE += (simulated GPU: CUDA sources on the host)
endif

LDLIBS := $(TRAIN_LIBS) $(CORE_LIBS)

# Objects depend on the flags they were built with: switching CUDA, SAN or
# STATIC in one build folder rebuilds what it must.
FLAGS_FILE := $(BUILD)/.flags
FLAGS_NOW  := $(CC) $(CFLAGS) $(FERRY_CFLAGS) $(LIB_CFLAGS) $(NVFLAGS) $(LDLIBS) $(LDFLAGS) $(CXX) $(SIMCXXFLAGS)
ifneq ($(shell cat $(FLAGS_FILE) 2>/dev/null),$(strip $(FLAGS_NOW)))
  $(shell mkdir -p $(BUILD) && echo '$(strip $(FLAGS_NOW))' > $(FLAGS_FILE))
endif

OBJ      := $(SRC_C:%.c=$(BUILD)/obj/%.o) $(SRC_CU:%.cu=$(BUILD)/obj/%.cu.o) $(SRC_SIMCU:%.cu=$(BUILD)/obj/%.sim.o)
# The folder says the library: src/model/ is libferry-train (what computes on
# tensors); every other folder of src/ is libferry (common, device with the
# simulated GPU's engine, tensor, dataset, loader).
TRAIN_OBJ  := $(filter $(BUILD)/obj/src/model/%,$(OBJ))
CORE_OBJ   := $(filter-out $(TRAIN_OBJ),$(OBJ))
# ferry_cuda_archs() reports the GPU code the build carries. NVFLAGS, in FLAGS_NOW,
# already changes with it, so the quoted define can stay out of CFLAGS.
$(BUILD)/obj/src/device/arch.o: FERRY_CFLAGS += -DFERRY_CUDA_ARCHS='"$(CUDA_ARCHS)"'
# ferry_build_features() names the BLAS libferry-train links (libferry includes no CBLAS header).
$(BUILD)/obj/src/device/device.o: FERRY_CFLAGS += -DFERRY_BUILD_BLAS='"$(BLAS)"'

# Before the first compile in a build folder, and again when its flags change:
# are the headers and libraries there? If not, name the Debian packages and the
# command that installs them (scripts/install-deps.sh --check) instead of failing
# in the middle of a compile. Optional tools the build did not find get a note.
DEPS_STAMP := $(BUILD)/.deps-ok
$(DEPS_STAMP): $(FLAGS_FILE)
	@CC="$(CC)" FERRY_DEPS_CFLAGS="$(filter -I%,$(FERRY_CFLAGS) $(CFLAGS))" FERRY_DEPS_LDFLAGS="$(filter -L%,$(LDFLAGS))" \
		FERRY_BLAS="$(BLAS)" FERRY_BLAS_HEADER="$(BLAS_HEADER)" FERRY_BLAS_LIBS="$(BLAS_LIBS)" \
		FERRY_DEPS_OPTIONAL="$(if $(and $(filter auto,$(CUDA_ASKED)),$(filter 0,$(CUDA))),nvcc) \
		$(if $(and $(filter auto,$(DIST_ASKED)),$(filter 0,$(DIST))),mpicc) \
		$(if $(and $(filter auto,$(CURL_ASKED)),$(filter 0,$(CURL))),curl)" \
		sh scripts/install-deps.sh --check && touch $@
# libferry-train's objects export only what include/ marks FERRY_API (the .cu files
# get the same through NVFLAGS). libferry's C objects keep default visibility, and
# its version script (build/libferry.map) sorts the exports: the FERRY_API
# functions under FERRY_0, the internal ferry_* that libferry-train calls under
# FERRY_PRIVATE (glibc's GLIBC_PRIVATE: no promise to users), nothing else.
# Tests, tools and samples link the archives and may still call internals.
$(TRAIN_OBJ): FERRY_CFLAGS += $(LIB_CFLAGS)
TOOL_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(sort $(wildcard tools/*.c)))
SAMPLES  := $(patsubst samples/%.c,$(BUILD)/samples/%,$(sort $(wildcard samples/*.c)))
TESTS    := $(patsubst tests/%.c,$(BUILD)/tests/%,$(sort $(wildcard tests/test_*.c)))
HARNESS  := $(BUILD)/obj/tests/harness.o $(BUILD)/obj/tests/harness_tar.o $(BUILD)/obj/tests/harness_http.o
DRILL    := $(BUILD)/tests/dist_drill
# Test and sample objects are kept, not deleted as intermediates after linking.
.SECONDARY: $(TESTS:$(BUILD)/tests/%=$(BUILD)/obj/tests/%.o) $(HARNESS) \
            $(SAMPLES:$(BUILD)/samples/%=$(BUILD)/obj/samples/%.o)

# The version is written once, in include/ferry/export.h.
version_part = $(shell sed -n 's/^.define FERRY_VERSION_$(1) *\([0-9][0-9]*\).*/\1/p' include/ferry/export.h)
VERSION_MAJOR := $(call version_part,MAJOR)
VERSION  := $(VERSION_MAJOR).$(call version_part,MINOR).$(call version_part,PATCH)
SONAME   := libferry.so.$(VERSION_MAJOR)
SO_REAL  := libferry.so.$(VERSION)
TRAIN_SONAME  := libferry-train.so.$(VERSION_MAJOR)
TRAIN_SO_REAL := libferry-train.so.$(VERSION)
LIBS_A   := $(BUILD)/libferry-train.a $(BUILD)/libferry.a
# Programs that only read data link libferry alone.
CORE_ONLY_SAMPLES := $(BUILD)/samples/embed

.PHONY: all lib tests test check check-build run deps clean note fuzz memcheck lint install uninstall
all: note lib $(BUILD)/ferry $(SAMPLES) tests
lib: $(BUILD)/libferry.a $(BUILD)/libferry.so $(BUILD)/libferry-train.a $(BUILD)/libferry-train.so
tests: $(TESTS) $(DRILL)

note:
	@echo "$(BUILD_NOTE)"$(if $(DIST_NOTE),; echo "$(DIST_NOTE)")

$(BUILD)/obj/%.o: %.c $(FLAGS_FILE) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(call quiet,CC,$<)$(CC) $(CFLAGS) $(FERRY_CFLAGS) -DFERRY_SOURCE_DIR=\"$(CURDIR)\" -c $< -o $@

$(BUILD)/obj/%.cu.o: %.cu $(FLAGS_FILE) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(call quiet,NVCC,$<)$(NVCC) $(NVFLAGS) -c $< -o $@

$(BUILD)/obj/%.sim.o: %.cu $(FLAGS_FILE) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(call quiet,CXX,$<)$(CXX) $(SIMCXXFLAGS) -c $< -o $@

$(BUILD)/libferry.a: $(CORE_OBJ)
	@mkdir -p $(@D)
	$(call quiet,AR,$@)rm -f $@ && ar rcs $@ $^

$(BUILD)/libferry-train.a: $(TRAIN_OBJ)
	@mkdir -p $(@D)
	$(call quiet,AR,$@)rm -f $@ && ar rcs $@ $^

# libferry's exports (see LIB_CFLAGS above): FERRY_API by name, from the headers.
lparen := (
PUBLIC_API = $(sort $(shell sed -n 's/^FERRY_API[^$(lparen)]*[ *]\([a-z_0-9]*\) *$(lparen).*/\1/p' include/ferry/*.h))
$(BUILD)/libferry.map: $(wildcard include/ferry/*.h) $(FLAGS_FILE)
	@mkdir -p $(@D)
	$(call quiet,GEN,$@)printf 'FERRY_0 {\n  global:\n%s\n};\nFERRY_PRIVATE {\n  global: ferry_*;\n  local: *;\n};\n' \
		"$(foreach f,$(PUBLIC_API),    $(f);)" > $@

# lib*.so -> lib*.so.MAJOR (the soname) -> lib*.so.MAJOR.MINOR.PATCH.
# --exclude-libs keeps what STATIC=1 links in from archives (libpng, the CUDA
# runtime) out of the exported symbols. --no-undefined: libferry is whole
# without libferry-train (sanitizer builds leave their runtime to the program).
SO_DEFS := $(if $(SAN),,-Wl$(comma)--no-undefined)
$(BUILD)/$(SO_REAL): $(CORE_OBJ) $(BUILD)/libferry.map
	$(call quiet,LD,$@)$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--exclude-libs,ALL $(SO_DEFS) \
		-Wl,--version-script,$(BUILD)/libferry.map -Wl,-Bsymbolic-functions -o $@ $(CORE_OBJ) \
		$(LDFLAGS) $(call so_libs,$(CORE_LIBS))

$(BUILD)/libferry.so: $(BUILD)/$(SO_REAL)
	$(call quiet,LN,$@)ln -sf $(SO_REAL) $(BUILD)/$(SONAME) && ln -sf $(SONAME) $@

# libferry-train needs libferry (NEEDED libferry.so.MAJOR, found beside it).
$(BUILD)/$(TRAIN_SO_REAL): $(TRAIN_OBJ) $(BUILD)/libferry.so
	$(call quiet,LD,$@)$(CC) -shared -Wl,-soname,$(TRAIN_SONAME) -Wl,--exclude-libs,ALL $(SO_DEFS) \
		-Wl,-rpath,'$$ORIGIN' -o $@ $(TRAIN_OBJ) $(BUILD)/$(SO_REAL) $(LDFLAGS) $(call so_libs,$(TRAIN_LIBS))

$(BUILD)/libferry-train.so: $(BUILD)/$(TRAIN_SO_REAL)
	$(call quiet,LN,$@)ln -sf $(TRAIN_SO_REAL) $(BUILD)/$(TRAIN_SONAME) && ln -sf $(TRAIN_SONAME) $@

$(BUILD)/ferry: $(TOOL_OBJ) $(LIBS_A)
	$(call quiet,LD,$@)$(CC) -o $@ $(TOOL_OBJ) $(LIBS_A) $(LDFLAGS) $(LDLIBS)

$(CORE_ONLY_SAMPLES): $(BUILD)/samples/%: $(BUILD)/obj/samples/%.o $(BUILD)/libferry.a
	@mkdir -p $(@D)
	$(call quiet,LD,$@)$(CC) -o $@ $< $(BUILD)/libferry.a $(LDFLAGS) $(CORE_LIBS)

$(filter-out $(CORE_ONLY_SAMPLES),$(SAMPLES)): $(BUILD)/samples/%: $(BUILD)/obj/samples/%.o $(LIBS_A)
	@mkdir -p $(@D)
	$(call quiet,LD,$@)$(CC) -o $@ $< $(LIBS_A) $(LDFLAGS) $(LDLIBS)

# The distributed failure drills have their own main (scripts/dist-test.sh runs them).
$(DRILL): $(BUILD)/obj/tests/dist_drill.o $(LIBS_A)
	@mkdir -p $(@D)
	$(call quiet,LD,$@)$(CC) -o $@ $< $(LIBS_A) $(LDFLAGS) $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(HARNESS) $(LIBS_A)
	@mkdir -p $(@D)
	$(call quiet,LD,$@)$(CC) -o $@ $< $(HARNESS) $(LIBS_A) $(LDFLAGS) $(LDLIBS)

# ---- install: make install [PREFIX=/usr/local] [DESTDIR=/staging] ----
# ferry.pc and ferry-train.pc describe this build variant: a program linking the
# archives needs what the libraries link (pkg-config --static), a .so brings its
# own. ferry-train Requires ferry: a training program gets both.
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
CMAKEDIR   ?= $(LIBDIR)/cmake/ferry
LDCONFIG   ?= ldconfig
PUBLIC_HEADERS := $(sort $(wildcard include/ferry/*.h))
# Dependencies pkg-config knows go in Requires.private, the rest of LDLIBS in
# Libs.private (STATIC=1 links libpng and zlib from archives: kept as linked).
pc_flag_libpng   := -lpng
pc_flag_libjpeg  := -ljpeg
pc_flag_zlib     := -lz
pc_flag_openblas := -lopenblas
# OpenBLAS by its module when BLAS_LIBS is just -lopenblas; any other BLAS (the
# reference one's -L and rpath included) stays in Libs.private as linked.
PC_BLAS     = $(if $(filter-out -lopenblas,$(BLAS_LIBS)),,$(if $(BLAS_LIBS),openblas))
pc_requires = $(foreach m,$(1),$(if $(shell pkg-config --exists $(m) 2>/dev/null && echo y),$(m)))
PC_REQUIRES = $(call pc_requires,$(if $(filter 1,$(STATIC)),,libpng libjpeg zlib))
PC_LIBS     = $(filter-out $(foreach m,$(PC_REQUIRES),$(pc_flag_$(m))),$(CORE_LIBS))
PC_TRAIN_REQUIRES = $(call pc_requires,$(PC_BLAS))
PC_TRAIN_LIBS     = $(filter-out $(foreach m,$(PC_TRAIN_REQUIRES),$(pc_flag_$(m))),$(TRAIN_LIBS))
pc_dir      = $(patsubst $(PREFIX)/%,$${prefix}/%,$(1))
pc_head     = 'prefix=$(PREFIX)' 'libdir=$(call pc_dir,$(LIBDIR))' 'includedir=$(call pc_dir,$(INCLUDEDIR))' ''

$(BUILD)/ferry.pc: $(FLAGS_FILE) FORCE
	$(call quiet,GEN,$@)printf '%s\n' $(pc_head) 'Name: ferry' \
		'Description: Feeds training data from files to a GPU (the data path)' \
		'Version: $(VERSION)' 'Requires.private: $(strip $(PC_REQUIRES))' \
		'Cflags: -I$${includedir}' 'Libs: -L$${libdir} -lferry' \
		'Libs.private: $(strip $(PC_LIBS))' > $@

$(BUILD)/ferry-train.pc: $(FLAGS_FILE) FORCE
	$(call quiet,GEN,$@)printf '%s\n' $(pc_head) 'Name: ferry-train' \
		'Description: Tensors ops, layers, optimisers and data-parallel training on ferry batches' \
		'Version: $(VERSION)' 'Requires: ferry = $(VERSION)' \
		'Requires.private: $(strip $(PC_TRAIN_REQUIRES))' \
		'Cflags: -I$${includedir}' 'Libs: -L$${libdir} -lferry-train' \
		'Libs.private: $(strip $(PC_TRAIN_LIBS))' > $@

# The CMake package (find_package(ferry) gives ferry::ferry and ferry::train):
# the same libraries and dependencies as the two .pc files; shared libraries by
# default, the archives with FERRY_STATIC set before find_package (then the
# private dependencies are linked as the .pc files' --static flags link them).
cmake_list = $(subst $(space),;,$(strip $(1)))
$(BUILD)/ferry-config.cmake: scripts/ferry-config.cmake.in $(FLAGS_FILE) FORCE
	$(call quiet,GEN,$@)sed -e 's|@VERSION@|$(VERSION)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
		-e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@SO_REAL@|$(SO_REAL)|g' \
		-e 's|@SONAME@|$(SONAME)|g' -e 's|@TRAIN_SO_REAL@|$(TRAIN_SO_REAL)|g' \
		-e 's|@TRAIN_SONAME@|$(TRAIN_SONAME)|g' \
		-e 's|@CORE_LIBS@|$(call cmake_list,$(CORE_LIBS))|g' \
		-e 's|@TRAIN_LIBS@|$(call cmake_list,$(TRAIN_LIBS))|g' $< > $@

$(BUILD)/ferry-config-version.cmake: scripts/ferry-config-version.cmake.in $(FLAGS_FILE) FORCE
	$(call quiet,GEN,$@)sed -e 's|@VERSION@|$(VERSION)|g' $< > $@
FORCE:

CMAKE_FILES := $(BUILD)/ferry-config.cmake $(BUILD)/ferry-config-version.cmake
install: lib $(BUILD)/ferry $(BUILD)/ferry.pc $(BUILD)/ferry-train.pc $(CMAKE_FILES)
	$(call quiet,INST,$(DESTDIR)$(PREFIX))install -d $(DESTDIR)$(INCLUDEDIR)/ferry \
		$(DESTDIR)$(LIBDIR) $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(CMAKEDIR) && \
	install -m 644 include/ferry.h $(DESTDIR)$(INCLUDEDIR)/ && \
	install -m 644 $(PUBLIC_HEADERS) $(DESTDIR)$(INCLUDEDIR)/ferry/ && \
	install -m 644 $(BUILD)/libferry.a $(BUILD)/libferry-train.a $(DESTDIR)$(LIBDIR)/ && \
	install -m 755 $(BUILD)/$(SO_REAL) $(BUILD)/$(TRAIN_SO_REAL) $(DESTDIR)$(LIBDIR)/ && \
	ln -sf $(SO_REAL) $(DESTDIR)$(LIBDIR)/$(SONAME) && \
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libferry.so && \
	ln -sf $(TRAIN_SO_REAL) $(DESTDIR)$(LIBDIR)/$(TRAIN_SONAME) && \
	ln -sf $(TRAIN_SONAME) $(DESTDIR)$(LIBDIR)/libferry-train.so && \
	install -m 755 $(BUILD)/ferry $(DESTDIR)$(BINDIR)/ && \
	install -m 644 $(BUILD)/ferry.pc $(BUILD)/ferry-train.pc $(DESTDIR)$(PKGCONFIGDIR)/ && \
	install -m 644 $(CMAKE_FILES) $(DESTDIR)$(CMAKEDIR)/
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then $(LDCONFIG) 2>/dev/null || true; fi

uninstall:
	$(call quiet,RM,$(DESTDIR)$(PREFIX))rm -f $(DESTDIR)$(INCLUDEDIR)/ferry.h \
		$(PUBLIC_HEADERS:include/ferry/%=$(DESTDIR)$(INCLUDEDIR)/ferry/%) \
		$(addprefix $(DESTDIR)$(LIBDIR)/,libferry.a $(SO_REAL) $(SONAME) libferry.so) \
		$(addprefix $(DESTDIR)$(LIBDIR)/,libferry-train.a $(TRAIN_SO_REAL) $(TRAIN_SONAME) libferry-train.so) \
		$(DESTDIR)$(BINDIR)/ferry $(DESTDIR)$(PKGCONFIGDIR)/ferry.pc $(DESTDIR)$(PKGCONFIGDIR)/ferry-train.pc \
		$(DESTDIR)$(CMAKEDIR)/ferry-config.cmake $(DESTDIR)$(CMAKEDIR)/ferry-config-version.cmake
	@rmdir $(DESTDIR)$(INCLUDEDIR)/ferry $(DESTDIR)$(CMAKEDIR) $(DESTDIR)$(patsubst %/,%,$(dir $(CMAKEDIR))) 2>/dev/null || true

deps:
	@FERRY_BLAS="$(BLAS)" sh scripts/install-deps.sh

# The whole suite: the plain build (with CUDA when found), everything again under
# ASan+UBSan, and the threaded tests under TSan; then all three again on two
# simulated GPUs (FERRY_SIM_GPUS=2), so every GPU test runs without a GPU. Sanitizer
# builds are CPU-only (the CUDA runtime does not run under ASan's shadow memory
# layout), which the simulated GPU does not need.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
# The quick tier (a few minutes): the plain build's tests, as built and on two
# simulated GPUs. `make test` (what .ci/run calls) runs everything.
check: deps
	@$(MAKE) --no-print-directory -j$(JOBS) all
	@sh scripts/run-tests.sh "$(BUILD)/tests" "sim=2:$(BUILD)/tests"

TSAN_TESTS ?= test_loader test_pinned test_device test_allocator test_dataset_threads test_faults \
              test_loader_gpu test_tensor test_ops test_sim test_shards test_shards_gz test_stream
test: deps
	@$(MAKE) --no-print-directory -j$(JOBS) all
	@$(MAKE) --no-print-directory -j$(JOBS) BUILD=$(BUILD)/asan CUDA=0 SAN=address,undefined tests
	@$(MAKE) --no-print-directory -j$(JOBS) BUILD=$(BUILD)/tsan CUDA=0 DIST=0 SAN=thread \
		$(addprefix $(BUILD)/tsan/tests/,$(filter $(TSAN_TESTS),$(notdir $(TESTS))))
	@if sh scripts/fuzz-run.sh --check; then $(MAKE) --no-print-directory fuzz || rm -f $(FUZZ_BINS); fi
	@$(if $(filter 1,$(CUDA)),$(MAKE) --no-print-directory BUILD=$(MEMCHECK_BUILD) CUDA=0 \
		$(MEMCHECK_TESTS:%=$(MEMCHECK_BUILD)/tests/%),:)
	@FERRY_FUZZ_DIR=$(BUILD)/fuzz FERRY_FUZZ_SECONDS=$(FUZZ_SECONDS) \
		FERRY_MEMCHECK_TESTS="$(MEMCHECK_TESTS:%=$(MEMCHECK_BUILD)/tests/%)" \
		FERRY_LINT_SRC="$(LINT_SRC)" FERRY_LINT_FLAGS="$(LINT_FLAGS)" JOBS=$(JOBS) \
		FERRY_BUILD=$(BUILD) FERRY_INSTALL_CC="$(CC)" \
		FERRY_INSTALL_MAKEARGS="CUDA=$(CUDA) DIST=$(DIST) STATIC=$(STATIC) BLAS=$(BLAS) \
		CUDA_ARCH=$(subst $(space),$(comma),$(strip $(CUDA_ARCH_LIST)))" \
		sh scripts/run-tests.sh "$(BUILD)/tests" "$(BUILD)/asan/tests" "$(BUILD)/tsan/tests" \
		"sim=2:$(BUILD)/tests" "sim=2:$(BUILD)/asan/tests" "sim=2:$(BUILD)/tsan/tests" \
		scripts/memcheck.sh scripts/fuzz-run.sh scripts/lint.sh scripts/dist-test.sh \
		scripts/sim-samples.sh scripts/cli-test.sh scripts/pack-test.sh scripts/resume-test.sh \
		scripts/install-test.sh scripts/header-test.sh scripts/gpu-check-dry.sh scripts/deps-test.sh \
		scripts/remote-test.sh

# ---- the GPU check (scripts/gpu-check.sh; docs/BENCHMARKS.md, section GPU) ----
# make gpu-check  here, without a GPU: builds GPU_CHECK_BUILD with STATIC=1, packs
#                 GPU_CHECK_BUILD/gpu-check (programs, libraries, Fashion-MNIST PNGs)
#                 and prints the carry list and the command to run on a lent GPU.
GPU_CHECK_BUILD ?= $(BUILD)/gpu
.PHONY: gpu-check
gpu-check: deps
	@bash scripts/gpu-check.sh prepare $(GPU_CHECK_BUILD)

# ---- robustness: fuzzers, valgrind, static analysis (see tests/fuzz/) ----
# make fuzz      libFuzzer binaries in $(BUILD)/fuzz/ (clang; the library rebuilt there
#                with -fsanitize=fuzzer-no-link,address,undefined, CPU only)
# make memcheck  valgrind on the CPU loader tests
# make lint      clang-tidy (.clang-tidy) and cppcheck over src/ and tools/
FUZZ_CC      ?= clang
FUZZ_TARGETS := png idx list device tar jpeg index npy
FUZZ_BINS     = $(FUZZ_TARGETS:%=$(BUILD)/fuzz/fuzz_%)
FUZZ_SECONDS ?= 10
fuzz:
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/fuzz CC=$(FUZZ_CC) CUDA=0 DIST=0 SIM_KERNELS=0 \
		SAN=fuzzer-no-link,address,undefined $(FUZZ_BINS)

# Used by the sub-make above (BUILD is then the fuzz folder).
$(BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(LIBS_A) $(FLAGS_FILE)
	$(call quiet,CC,$<)$(CC) $(filter-out -MMD -MP,$(CFLAGS) $(FERRY_CFLAGS)) -fsanitize=fuzzer -o $@ $< $(LIBS_A) \
		$(LDFLAGS) $(LDLIBS)

MEMCHECK_BUILD  := $(if $(filter 1,$(CUDA)),$(BUILD)/cpu,$(BUILD))
MEMCHECK_TESTS  ?= test_loader test_faults test_fuzz_replay test_jpeg test_crop
memcheck:
	@$(MAKE) --no-print-directory BUILD=$(MEMCHECK_BUILD) CUDA=0 \
		$(MEMCHECK_TESTS:%=$(MEMCHECK_BUILD)/tests/%)
	@sh scripts/memcheck.sh $(MEMCHECK_TESTS:%=$(MEMCHECK_BUILD)/tests/%)

# The C files this build compiles, less the CUDA variants (the lint reads the CPU
# side), with the MPI headers when the build uses them. make test runs the same.
LINT_SRC   := $(filter-out %_cuda.c,$(SRC_C)) $(sort $(wildcard tools/*.c))
LINT_FLAGS := $(if $(filter 1,$(DIST)),-DFERRY_HAVE_MPI=1 \
                $(patsubst -I%,-isystem%,$(shell mpicc --showme:compile 2>/dev/null)))
lint:
	@FERRY_LINT_FLAGS="$(LINT_FLAGS)" JOBS=$(JOBS) sh scripts/lint.sh $(LINT_SRC)

run: deps
	@$(MAKE) --no-print-directory -j$(JOBS) all
	@sh scripts/run.sh $(BUILD)

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
