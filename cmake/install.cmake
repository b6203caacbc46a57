# `cmake --install BUILD --prefix P` (make install PREFIX=P): dcc, libdcrt.a,
# libdietcode.a, the public headers, pkg-config files (dietcode.pc for
# embedders, dcrt.pc for AOT clients) and a CMake package (dietcode::dietcode,
# dietcode::dcrt). The .pc and config files find the prefix from where they
# lie, so the tree can move; LLVM and cJSON are named as this build found them.
# tests/install/run.sh checks all of it.

# The installed dcc keeps the path to libLLVM it was linked with.
set_target_properties(dcc PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS dcc RUNTIME DESTINATION bin)
install(TARGETS dcrt dietcode ARCHIVE DESTINATION lib)
file(GLOB DC_PUBLIC_HEADERS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/include/dietcode/*.h)
install(FILES ${DC_PUBLIC_HEADERS} DESTINATION include/dietcode)

# LLVM's link flags as llvm-config gives them (the shared libLLVM, or with
# DC_STATIC_LLVM the components dcc links and their system libraries).
set(DC_LLVM_CONFIG ${LLVM_TOOLS_BINARY_DIR}/llvm-config)
if(DC_STATIC_LLVM)
  execute_process(COMMAND ${DC_LLVM_CONFIG} --link-static --ldflags --libs --system-libs
                          nvptx x86 orcjit passes bitreader linker
                  OUTPUT_VARIABLE DC_LLVM_FLAGS OUTPUT_STRIP_TRAILING_WHITESPACE)
  string(APPEND DC_LLVM_FLAGS " -lstdc++")
else()
  execute_process(COMMAND ${DC_LLVM_CONFIG} --link-shared --ldflags --libs
                  OUTPUT_VARIABLE DC_LLVM_FLAGS OUTPUT_STRIP_TRAILING_WHITESPACE)
endif()
string(REGEX REPLACE "[ \t\r\n]+" " " DC_LLVM_FLAGS "${DC_LLVM_FLAGS}")
separate_arguments(DC_LLVM_FLAG_LIST UNIX_COMMAND "${DC_LLVM_FLAGS}")
list(JOIN LLVM_INCLUDE_DIRS " -I" DC_LLVM_CFLAGS)
set(DC_LLVM_CFLAGS "-I${DC_LLVM_CFLAGS}")

# cJSON in dietcode.pc: its own .pc when pkg-config has one, else the
# library CMake found. protobuf-c (the ONNX importer's) always has its .pc.
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(DC_PC_CJSON QUIET libcjson)
endif()
if(DC_PC_CJSON_FOUND)
  set(DC_PC_REQUIRES "Requires: libcjson libprotobuf-c")
  set(DC_PC_CJSON_LIBS "")
else()
  get_target_property(DC_CJSON_LOCATION cjson LOCATION)
  get_filename_component(DC_CJSON_DIR "${DC_CJSON_LOCATION}" DIRECTORY)
  set(DC_PC_REQUIRES "Requires: libprotobuf-c")
  set(DC_PC_CJSON_LIBS " -L${DC_CJSON_DIR} -lcjson")
endif()

set(DC_PKG_DIR ${CMAKE_BINARY_DIR}/pkg)
configure_file(${CMAKE_SOURCE_DIR}/cmake/dietcode.pc.in ${DC_PKG_DIR}/dietcode.pc @ONLY)
configure_file(${CMAKE_SOURCE_DIR}/cmake/dcrt.pc.in ${DC_PKG_DIR}/dcrt.pc @ONLY)
configure_file(${CMAKE_SOURCE_DIR}/cmake/dietcodeConfig.cmake.in
               ${DC_PKG_DIR}/dietcodeConfig.cmake @ONLY)
include(CMakePackageConfigHelpers)
write_basic_package_version_file(${DC_PKG_DIR}/dietcodeConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${DC_PKG_DIR}/dietcode.pc ${DC_PKG_DIR}/dcrt.pc DESTINATION lib/pkgconfig)
install(FILES ${DC_PKG_DIR}/dietcodeConfig.cmake ${DC_PKG_DIR}/dietcodeConfigVersion.cmake
        DESTINATION lib/cmake/dietcode)
