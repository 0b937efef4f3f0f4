# A small terminal tool: readline line editing on the terminal, a log in
# the working directory.
import readline

readline.parse_and_bind("tab: complete")
name = input("name? ")
with open("greetings.log", "a") as log:
    log.write(name + "\n")
print("hello", name)
