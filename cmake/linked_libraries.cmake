# How train links the libraries it uses that need not match the host: one place for all of them.
#
# TRAIN_STATIC_LIBRARIES=ON (the default) links libjpeg-turbo, libpng, OpenBLAS and OpenMP (libgomp) into every
# executable, so `train` can be copied into any image that has a driver and Open MPI (docs/building.md, "How
# static the binary is"). What stays shared, and why:
#   glibc         a static glibc cannot load Open MPI's plugins or resolve host names through NSS;
#   Open MPI      must be the build of the mpirun/orted that start the ranks; it loads its transports as plugins;
#   zlib          Open MPI (libopen-pal) loads libz.so.1 into every rank anyway: a second copy linked in would
#                 leave ldd's list as it is and put two zlibs in one process;
#   CUDA's libraries (cuDNN, cuBLAS where no static one, NCCL) come with the driver's stack of the host/image.
# Sound for OpenMP because nothing else in the process brings an OpenMP runtime: OpenBLAS is its pthread
# build (its own threads, which the CPU kernels keep at one inside their OpenMP slabs), and neither Open MPI nor
# the CUDA libraries use OpenMP. OpenBLAS's static archive is the same build as its shared library (Debian's
# DYNAMIC_ARCH: it picks its kernels for the CPU at start, OPENBLAS_CORETYPE included), so the numbers are the
# same bit for bit.
#
# Targets for the rest of the build: train::jpeg, train::png, train::openblas, train::openmp (ZLIB::ZLIB as it is).
option(TRAIN_STATIC_LIBRARIES "Link libjpeg-turbo, libpng, OpenBLAS and OpenMP into the executables" ON)

find_package(ZLIB REQUIRED)
find_package(JPEG REQUIRED)
find_package(PNG REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)
set(BLA_VENDOR OpenBLAS)
find_package(BLAS REQUIRED)

add_library(train::jpeg INTERFACE IMPORTED)
add_library(train::png INTERFACE IMPORTED)
add_library(train::openblas INTERFACE IMPORTED)
add_library(train::openmp INTERFACE IMPORTED)
target_include_directories(train::jpeg INTERFACE ${JPEG_INCLUDE_DIRS})
target_include_directories(train::png INTERFACE ${PNG_INCLUDE_DIRS})
target_compile_options(train::openmp INTERFACE ${OpenMP_CXX_FLAGS})

if(TRAIN_STATIC_LIBRARIES)
  # The archives beside the shared libraries find_package found (the same package's build).
  get_filename_component(train_jpeg_dir "${JPEG_LIBRARY_RELEASE}" DIRECTORY)
  get_filename_component(train_png_dir "${PNG_LIBRARY_RELEASE}" DIRECTORY)
  list(GET BLAS_LIBRARIES 0 train_blas_library)
  get_filename_component(train_blas_library "${train_blas_library}" REALPATH)
  get_filename_component(train_blas_dir "${train_blas_library}" DIRECTORY)
  get_filename_component(train_gomp_dir "${OpenMP_gomp_LIBRARY}" DIRECTORY)
  find_library(TRAIN_JPEG_ARCHIVE NAMES libjpeg.a HINTS ${train_jpeg_dir} NO_DEFAULT_PATH REQUIRED)
  find_library(TRAIN_PNG_ARCHIVE NAMES libpng16.a libpng.a HINTS ${train_png_dir} NO_DEFAULT_PATH REQUIRED)
  find_library(TRAIN_OPENBLAS_ARCHIVE NAMES libopenblas.a HINTS ${train_blas_dir} NO_DEFAULT_PATH REQUIRED)
  find_library(TRAIN_GOMP_ARCHIVE NAMES libgomp.a HINTS ${train_gomp_dir} NO_DEFAULT_PATH REQUIRED)
  target_link_libraries(train::jpeg INTERFACE ${TRAIN_JPEG_ARCHIVE})
  target_link_libraries(train::png INTERFACE ${TRAIN_PNG_ARCHIVE} ZLIB::ZLIB m)
  target_link_libraries(train::openblas INTERFACE ${TRAIN_OPENBLAS_ARCHIVE} Threads::Threads m)
  target_link_libraries(train::openmp INTERFACE ${TRAIN_GOMP_ARCHIVE} Threads::Threads)
  message(STATUS "train: linked in ${TRAIN_JPEG_ARCHIVE} ${TRAIN_PNG_ARCHIVE} ${TRAIN_OPENBLAS_ARCHIVE} ${TRAIN_GOMP_ARCHIVE}")
else()
  target_link_libraries(train::jpeg INTERFACE JPEG::JPEG)
  target_link_libraries(train::png INTERFACE PNG::PNG)
  target_link_libraries(train::openblas INTERFACE BLAS::BLAS)
  target_link_libraries(train::openmp INTERFACE OpenMP::OpenMP_CXX)
endif()
