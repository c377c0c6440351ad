// smartico-sim: everything lives in the SmarticoSim library (tested there); this only runs it.
import SmarticoSim

SimCommand.main()
