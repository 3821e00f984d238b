#include "application.h"

int main(int argc, char *argv[])
{
    return AgentDeck::runApplication(argc, argv);
}
