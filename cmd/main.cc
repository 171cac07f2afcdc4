#include "cmd/cli.h"

int main(int argc, char** argv) { return gm::cli::Main(argc, argv); }
